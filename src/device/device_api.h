// What stands behind hoop::device: the CUDA runtime (device_cuda.cc), host memory standing in
// for devices (device_fake.cc, under HOOP_FAKE_DEVICE), or nothing (device.cc's, where there is
// no CUDA). device.cc checks every argument and owns the streams, events and buffers; an Api
// only does the work, so the three cannot disagree on what a call accepts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "device/device.h"
#include "hoop/core.h"

namespace hoop::device::detail {

class Api {
 public:
  virtual ~Api() = default;

  virtual bool fake() const = 0;
  virtual int count() const = 0;
  /// Why count() is 0; empty otherwise.
  virtual std::string unavailable_reason() const = 0;
  virtual std::string describe() const = 0;
  virtual bool mps_active() const = 0;

  /// The device of `p`, kCpuDevice for host memory; never fails.
  virtual int pointer_device(const void* p) const = 0;
  /// Whether a kernel reaches `p`: device, managed or pinned host memory, not pageable memory.
  virtual bool kernel_reachable(const void* p) const = 0;
  virtual Status set_device(int device) = 0;
  virtual Result<int> current_device() = 0;

  virtual Result<void*> create_stream(int device) = 0;
  virtual Status destroy_stream(void* stream) = 0;
  /// The device `stream` (null: the calling thread's default stream) belongs to.
  virtual int stream_device(void* stream) = 0;
  /// Whether everything queued on `stream` has finished; the failure of what ran otherwise.
  virtual Result<bool> stream_done(void* stream) = 0;

  virtual Result<void*> create_event(int device, bool interprocess) = 0;
  virtual Status destroy_event(void* event) = 0;
  virtual Status record(void* event, void* stream) = 0;
  virtual Result<bool> query(void* event) = 0;
  virtual Status make_wait(void* event, void* stream) = 0;

  virtual Result<void*> allocate(int device, std::size_t bytes) = 0;
  virtual Status release(void* data) = 0;
  virtual Result<void*> allocate_pinned(std::size_t bytes) = 0;
  virtual Status release_pinned(void* data) = 0;

  /// Queued on `stream`; null: the thread's default stream, finished before returning.
  virtual Status copy(void* dst, const void* src, std::size_t bytes, void* stream) = 0;
  virtual Status zero(void* dst, std::size_t bytes, void* stream) = 0;
  /// dst = a op b over `count` elements, queued on `stream` (null: the default stream); the
  /// arguments are checked, and every pointer is kernel_reachable.
  virtual Status combine(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                         ReduceOp op, void* stream) = 0;
  virtual Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor,
                        void* stream) = 0;
  virtual Status scale(void* buf, std::size_t count, DataType dtype, double factor,
                       void* stream) = 0;

  virtual Result<IpcHandle> export_memory(void* base) = 0;
  virtual Result<void*> open_memory(const IpcHandle& handle) = 0;
  virtual Status close_memory(void* base) = 0;
};

/// The CUDA runtime's Api; defined in CUDA builds only.
Api& cuda_api();
/// Host memory standing in for `count` devices (1 to 8).
Api& fake_api(int count);

}  // namespace hoop::device::detail
