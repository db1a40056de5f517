#include "collectives/algorithms/context.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/patterns/partition.h"
#include "core/reduce.h"

namespace hoop::collectives {

std::byte* Scratch::get(int slot, std::size_t bytes) {
  // Never zero-sized, so callers always get a valid pointer even for empty transfers.
  bytes = bytes == 0 ? 1 : bytes;
  if (sizes_[slot] < bytes) {
    buffers_[slot].reset();  // free first: peak memory stays at one buffer
    buffers_[slot] = std::make_unique_for_overwrite<std::byte[]>(bytes);
    sizes_[slot] = bytes;
  }
  return buffers_[slot].get();
}

Result<std::byte*> Scratch::get_on(int device, int slot, std::size_t bytes) {
  if (device == kCpuDevice) return get(slot, bytes);
  HOOP_RETURN_IF_ERROR(device_buffers_[slot].reserve(device, bytes == 0 ? 1 : bytes));
  return device_buffers_[slot].data();
}

Status Context::reduce_into(void* dst, const void* src, std::size_t count, DataType dtype,
                            ReduceOp op) {
  if (device == kCpuDevice) return hoop::reduce_into(dst, src, count, dtype, op);
  HOOP_RETURN_IF_ERROR(device::reduce_into(dst, src, count, dtype, op, stream));
  return device::synchronize(stream, deadline);
}

Status Context::reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                       ReduceOp op) {
  if (device == kCpuDevice) return hoop::reduce(dst, a, b, count, dtype, op);
  HOOP_RETURN_IF_ERROR(device::reduce(dst, a, b, count, dtype, op, stream));
  return device::synchronize(stream, deadline);
}

const patterns::Ring& Context::ring() {
  if (laid_out_ring != nullptr && laid_out_ring->size() == size) return *laid_out_ring;
  if (!rank_order_ring) rank_order_ring.emplace(size);
  return *rank_order_ring;
}

Status Context::divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor) {
  if (device == kCpuDevice) return hoop::divide(buf, count, dtype, divisor);
  HOOP_RETURN_IF_ERROR(device::divide(buf, count, dtype, divisor, stream));
  return device::synchronize(stream, deadline);
}

Status Context::copy_on_device(void* dst, const void* src, std::size_t bytes) {
  HOOP_RETURN_IF_ERROR(device::copy(dst, src, bytes, stream));
  return device::synchronize(stream, deadline);
}

Status Context::exchange(int to, const void* send_data, std::size_t send_bytes, int from,
                         void* recv_data, std::size_t recv_bytes) {
  // The receive goes first so that a peer's early data lands in place rather than in the
  // transport's unexpected-message buffer.
  HOOP_ASSIGN_OR_RETURN(RequestId r, recv(from, recv_data, recv_bytes));
  // Every rank of an exchange posts its receive before it waits: the send may be lent.
  Result<RequestId> s = send_lent(to, send_data, send_bytes);
  if (!s.ok()) return s.status();
  const RequestId ids[2] = {r, *s};
  return wait(ids);
}

namespace {

// Slices of an exchange: a quarter of it, within [32 KiB, 512 KiB], so that the reduction of
// one slice overlaps the transfer of the next (measured on 2 ranks over loopback: a 512 KiB
// recursive-doubling allreduce took 450 us as one message and 280 us in slices, medians of
// 3-5 runs on a noisy 2-core VM).
std::size_t exchange_slice_elems(std::size_t bytes, std::size_t es) {
  constexpr std::size_t kMin = std::size_t{32} << 10;
  constexpr std::size_t kMax = std::size_t{512} << 10;
  return std::max<std::size_t>(1, std::clamp((bytes + 3) / 4, kMin, kMax) / es);
}

}  // namespace

Status Context::exchange_reduce(int partner, const std::byte* send, std::size_t send_count,
                                std::byte* dst, std::byte* tmp, std::size_t recv_count,
                                DataType dtype, ReduceOp op) {
  const std::size_t es = dtype_size(dtype);
  const std::size_t max_slice = exchange_slice_elems(std::max(send_count, recv_count) * es, es);
  const patterns::Range in{0, recv_count};
  const patterns::Range out{0, send_count};
  const std::size_t recv_slices = patterns::slice_count(in, max_slice);
  const std::size_t send_slices = patterns::slice_count(out, max_slice);
  std::vector<RequestId> recvs;
  std::vector<RequestId> sends;
  recvs.reserve(recv_slices);
  sends.reserve(send_slices);
  // Receives first, so that the partner's early slices land in place.
  for (std::size_t j = 0; j < recv_slices; ++j) {
    const patterns::Range s = patterns::slice(in, max_slice, j);
    HOOP_ASSIGN_OR_RETURN(RequestId id, recv(partner, tmp + s.offset * es, s.length * es));
    recvs.push_back(id);
  }
  for (std::size_t j = 0; j < send_slices; ++j) {
    const patterns::Range s = patterns::slice(out, max_slice, j);
    HOOP_ASSIGN_OR_RETURN(RequestId id, this->send(partner, send + s.offset * es, s.length * es));
    sends.push_back(id);
  }
  const bool aliased = send == dst;
  std::size_t sends_done = 0;
  for (std::size_t j = 0; j < recv_slices; ++j) {
    const patterns::Range s = patterns::slice(in, max_slice, j);
    HOOP_RETURN_IF_ERROR(wait_one(transport, recvs[j], deadline));
    // Sends leave in order, so the slices before and at j are the ones to wait for.
    for (; aliased && sends_done <= j && sends_done < sends.size(); ++sends_done)
      HOOP_RETURN_IF_ERROR(wait_one(transport, sends[sends_done], deadline));
    HOOP_RETURN_IF_ERROR(
        this->reduce_into(dst + s.offset * es, tmp + s.offset * es, s.length, dtype, op));
  }
  return wait(std::span<const RequestId>(sends).subspan(sends_done));
}

}  // namespace hoop::collectives
