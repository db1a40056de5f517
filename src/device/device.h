// hoop::device: CUDA device memory, streams, events and the reduction kernels, for the parts of
// hoop that take GPU buffers (the Communicator's device path, the runtime's device fusion
// buffer, transports/cuda, collectives/nccl).
//
// The header compiles without CUDA: streams and events are opaque handles (cudaStream_t and
// cudaEvent_t cast to void*). What does the work is chosen once per process (device_api.h):
//   - the CUDA runtime, in a build with CUDA;
//   - the fake device, where HOOP_FAKE_DEVICE=N (N >= 1) is set: N devices whose memory is host
//     memory (shared, so that another process opens it as through CUDA IPC), whose streams run
//     their copies and kernels when an event or a synchronize asks for them, and whose kernels
//     are the host's; it lets CI run the device path's protocols (routes, CUDA IPC, staging)
//     where no GPU is, so that only the copies and kernels themselves need one;
//   - nothing otherwise: device_count() is 0, every pointer is host memory and everything else
//     fails with invalid_argument saying why; callers therefore need no #ifdef.
//
// Kernels compute exactly what src/core/reduce.h computes on the CPU (same NaN rule for
// min/max, integer wrap-around, f16/bf16 accumulated in f32 and rounded to nearest even), so a
// device allreduce and a host allreduce of the same inputs agree bit for bit. (A NaN result is a
// NaN on both, but its payload may differ: GPU arithmetic returns the canonical NaN.)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "hoop/core.h"
#include "hoop/transport.h"

namespace hoop::device {

/// Whether this build was compiled with CUDA.
bool cuda_built();
/// The number of CUDA devices this process can use; 0 without a CUDA build, driver or device.
/// Never fails.
int device_count();
/// Why device_count() is 0 ("hoop was built without CUDA", or the CUDA runtime's error);
/// empty when a device is usable. GPU tests print it when they skip.
std::string unavailable_reason();
/// The CUDA runtime's version and the usable devices' names, for `hooprun --check-build`
/// ("CUDA 13.0, 1 device: NVIDIA H100 80GB HBM3"); empty when device_count() is 0.
std::string describe();

/// Whether the fake device (HOOP_FAKE_DEVICE) stands in for CUDA in this process.
bool fake();
/// Whether the CUDA MPS control daemon serves this process (its control pipe exists in
/// CUDA_MPS_PIPE_DIRECTORY, default /tmp/nvidia-mps): processes that share a GPU then run their
/// kernels side by side instead of in time slices. Never fails; false on the fake device.
bool mps_active();

/// The CUDA device whose memory `p` points to, or kCpuDevice for host memory (pageable,
/// pinned or unknown to CUDA). Managed memory counts as device memory. Never fails.
int pointer_device(const void* p);

/// Makes `device` the calling thread's current CUDA device.
Status set_device(int device);

/// An owned CUDA stream on one device (non-blocking with respect to the legacy stream).
class Stream {
 public:
  /// Creates a stream on `device`.
  static Result<Stream> create(int device);
  Stream() = default;
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  /// The cudaStream_t, or null (the per-thread default stream) for a default-constructed one.
  void* handle() const { return handle_; }
  int device() const { return device_; }

 private:
  void* handle_ = nullptr;
  int device_ = kCpuDevice;
};

/// An owned CUDA event (timing disabled; interprocess when asked, for transports/cuda).
class Event {
 public:
  /// Creates an event on `device`; `interprocess` makes it shareable with ipc_handle().
  static Result<Event> create(int device, bool interprocess = false);
  Event() = default;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  /// Records the event on `stream` (a cudaStream_t, null: the per-thread default stream).
  Status record(void* stream);
  /// Whether all work before the last record() has finished; the CUDA error if it failed.
  Result<bool> query() const;
  /// Makes `stream` wait for the last record() without blocking the host.
  Status make_wait(void* stream) const;
  /// Waits until the work before the last record() has finished, polling as synchronize() does,
  /// so that the wait ends at `deadline` with timeout_error naming the device.
  Status wait(Deadline deadline) const;
  void* handle() const { return handle_; }

 private:
  void* handle_ = nullptr;
  int device_ = kCpuDevice;
};

/// An owned device allocation (cudaMalloc), grow-only when used through reserve().
class Buffer {
 public:
  /// Allocates `bytes` bytes on `device` (0 bytes: an empty buffer with a null pointer).
  static Result<Buffer> allocate(int device, std::size_t bytes);
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  /// Makes the buffer at least `bytes` long on `device` (reallocating, contents lost, when it
  /// is smaller or on another device).
  Status reserve(int device, std::size_t bytes);
  std::byte* data() const { return static_cast<std::byte*>(data_); }
  std::size_t size() const { return size_; }
  int device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
  int device_ = kCpuDevice;
};

/// Pinned (page-locked) host memory (cudaHostAlloc), grow-only through reserve(): copies between
/// it and a device run asynchronously at the bus's speed, where pageable memory is staged by the
/// driver.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  /// Makes the buffer at least `bytes` long (reallocating, contents lost, when it is smaller).
  Status reserve(std::size_t bytes);
  std::byte* data() const { return static_cast<std::byte*>(data_); }
  std::size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A device allocation exported for the other processes of this host (cudaIpcMemHandle_t).
struct IpcHandle {
  std::array<unsigned char, 64> bytes{};
};

/// Exports the allocation that starts at `base` (a Buffer's data()).
Result<IpcHandle> export_memory(void* base);

/// Another process's allocation opened through its IpcHandle (cudaIpcOpenMemHandle, with peer
/// access enabled where it is on another device), closed on destruction; the exporter must keep
/// it allocated meanwhile.
class IpcMapping {
 public:
  /// Opens `handle`'s allocation in this process.
  static Result<IpcMapping> open(const IpcHandle& handle);
  IpcMapping() = default;
  IpcMapping(IpcMapping&& other) noexcept;
  IpcMapping& operator=(IpcMapping&& other) noexcept;
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  ~IpcMapping();
  std::byte* base() const { return static_cast<std::byte*>(base_); }

 private:
  void* base_ = nullptr;
};

/// Copies `bytes` bytes between any two of host and device memory (cudaMemcpyDefault),
/// asynchronously on `stream`; with a null stream the copy has finished when this returns.
Status copy(void* dst, const void* src, std::size_t bytes, void* stream = nullptr);

/// Sets `bytes` bytes of device memory at `dst` to zero (cudaMemsetAsync) on `stream`; with a
/// null stream they are zero when this returns.
Status zero(void* dst, std::size_t bytes, void* stream = nullptr);

/// Waits until every operation queued on `stream` has finished, polling so that the wait ends
/// at `deadline` with timeout_error instead of blocking forever on a hung kernel or peer.
Status synchronize(void* stream, Deadline deadline);

/// Device counterparts of src/core/reduce.h, queued on `stream` (null: the per-thread default
/// stream); the arguments are checked as there. dst, src, a and b are device pointers of the
/// current device (or other memory its kernels reach: a peer device's with peer access enabled,
/// managed or pinned host memory); pageable host memory is invalid_argument. Loads are 16-byte
/// vectors where the pointers allow.
Status reduce_into(void* dst, const void* src, std::size_t count, DataType dtype, ReduceOp op,
                   void* stream = nullptr);
Status reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
              ReduceOp op, void* stream = nullptr);
Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor,
              void* stream = nullptr);
/// buf[i] *= factor for a float dtype (f16/bf16 through f32, f32 in f32, f64 in f64), as the
/// runtime's prescale/postscale do on the host; invalid_argument for an integer dtype.
Status scale(void* buf, std::size_t count, DataType dtype, double factor, void* stream = nullptr);

}  // namespace hoop::device
