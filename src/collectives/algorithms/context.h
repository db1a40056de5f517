// What every algorithm runs with: the transport, this rank's place, the collective's deadline
// and scratch memory that the communicator keeps across calls (so a training loop that calls
// allreduce on the same sizes allocates once).
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "collectives/patterns/ring.h"
#include "device/device.h"
#include "hoop/communicator.h"
#include "hoop/transport.h"

namespace hoop::collectives {

/// Grow-only scratch buffers, one per slot, reused by every collective of one communicator:
/// host memory, and device memory for the collectives that run on a device's buffers.
class Scratch {
 public:
  static constexpr int kSlots = 2;
  /// At least `bytes` bytes of host memory in slot `slot` (contents undefined); never null.
  std::byte* get(int slot, std::size_t bytes);
  /// The same in the memory of `device` (kCpuDevice: get()); fails when cudaMalloc does.
  Result<std::byte*> get_on(int device, int slot, std::size_t bytes);

 private:
  std::unique_ptr<std::byte[]> buffers_[kSlots];
  std::size_t sizes_[kSlots] = {0, 0};
  device::Buffer device_buffers_[kSlots];
};

/// One collective call's environment.
struct Context {
  Transport& transport;
  int rank;
  int size;
  Deadline deadline;
  Scratch& scratch;
  /// Where the collective's buffers (and so its scratch) live: kCpuDevice, or a CUDA device
  /// whose memory the transport reads and writes directly (transports/cuda).
  int device = kCpuDevice;
  /// The device's work queue for reductions and copies (a cudaStream_t).
  void* stream = nullptr;
  /// The communicator's ring in topology's order (each host's ranks together), built once per
  /// communicator; null or of another size (a sub-group's context): rank order.
  const patterns::Ring* laid_out_ring = nullptr;

  /// The ring of this collective's ranks: laid_out_ring, else rank order (built on first use).
  const patterns::Ring& ring();
  /// ring()'s rank-order ring, once built.
  std::optional<patterns::Ring> rank_order_ring = std::nullopt;

  /// At least `bytes` bytes of scratch slot `slot` where the buffers live.
  Result<std::byte*> scratch_buffer(int slot, std::size_t bytes) {
    return scratch.get_on(device, slot, bytes);
  }
  /// The reductions of core/reduce.h, on the host or (finished before returning, so that the
  /// result can be sent) on the device.
  Status reduce_into(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op);
  Status reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                ReduceOp op);
  Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor);
  /// memmove on the host, a finished device copy on the device; a no-op when dst == src.
  /// Inline: small messages copy their payloads in and out of frames with it.
  Status copy(void* dst, const void* src, std::size_t bytes) {
    if (dst == src || bytes == 0) return Status::success();
    if (device != kCpuDevice) return copy_on_device(dst, src, bytes);
    std::memmove(dst, src, bytes);
    return Status::success();
  }

  /// Posts a send to `peer` (byte count).
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) {
    return transport.send(peer, data, bytes);
  }
  /// Posts a send to `peer` that another send to it follows at once (Transport::send_more).
  Result<RequestId> send_more(int peer, const void* data, std::size_t bytes) {
    return transport.send_more(peer, data, bytes);
  }
  /// Posts one side of an exchange's send to `peer` (Transport::send_lent).
  Result<RequestId> send_lent(int peer, const void* data, std::size_t bytes) {
    return transport.send_lent(peer, data, bytes);
  }
  /// Posts a one-way hop's send to `peer` (Transport::send_awaited).
  Result<RequestId> send_awaited(int peer, const void* data, std::size_t bytes) {
    return transport.send_awaited(peer, data, bytes);
  }
  /// Posts a receive from `peer` (byte count).
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) {
    return transport.recv(peer, data, bytes);
  }
  /// Waits for the requests until the collective's deadline.
  Status wait(std::span<const RequestId> ids) { return transport.wait(ids, deadline); }
  /// Sends `send_bytes` to `to` and receives `recv_bytes` from `from`, both at once, and waits.
  Status exchange(int to, const void* send_data, std::size_t send_bytes, int from, void* recv_data,
                  std::size_t recv_bytes);
  /// Sends `send_count` elements at `send` to `partner` while receiving `recv_count` of its
  /// elements into `tmp`, and reduces them into `dst` (dst = dst op received), slice by slice
  /// as they arrive, so the reduction overlaps the transfer of later slices. `send` may be
  /// `dst` itself (recursive doubling); a slice is then only overwritten once it has been sent.
  Status exchange_reduce(int partner, const std::byte* send, std::size_t send_count, std::byte* dst,
                         std::byte* tmp, std::size_t recv_count, DataType dtype, ReduceOp op);
  /// copy() where the buffers are device memory.
  Status copy_on_device(void* dst, const void* src, std::size_t bytes);
};

}  // namespace hoop::collectives
