// Where one response's tensors live, for the executor: host memory, where copies and scalings
// are plain loops that are done when they return, or the memory of one CUDA device, where they
// are queued on the executor's stream. The Communicator runs device collectives on streams of
// its own, so the executor waits for its queued work (sync) before handing a buffer to a
// collective and before finishing the handles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "device/device.h"
#include "hoop/hoop.h"

namespace hoop::runtime {

class Memory {
 public:
  /// Host memory.
  Memory() = default;
  /// The memory of CUDA device `device`, with work queued on `stream` (a cudaStream_t of it).
  Memory(int device, void* stream) : device_(device), stream_(stream) {}

  bool on_device() const { return device_ != kCpuDevice; }
  /// kCpuDevice or the CUDA device.
  int device() const { return device_; }

  /// dst = src * factor for `count` elements (a copy when factor is 1; dst may be src).
  Status scale_copy(void* dst, const void* src, std::size_t count, DataType dtype,
                    double factor) const;
  /// Copies `bytes` bytes (no overlap unless dst == src).
  Status copy(void* dst, const void* src, std::size_t bytes) const;
  /// Sets `bytes` bytes at `dst` to zero.
  Status zero(void* dst, std::size_t bytes) const;
  /// buf /= divisor, elementwise.
  Status divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor) const;
  /// Waits, until `deadline` at most, for the work queued so far (nothing to wait for on the
  /// host).
  Status sync(Deadline deadline) const;
  /// A result tensor of `bytes` bytes in this memory.
  Status allocate(OwnedTensor& out, std::size_t bytes) const;

 private:
  int device_ = kCpuDevice;
  void* stream_ = nullptr;
};

/// A grow-only scratch buffer in host or device memory, kept across responses.
class Workspace {
 public:
  /// At least `bytes` bytes in `memory` (contents are not kept when it grows or moves).
  Result<std::byte*> get(const Memory& memory, std::size_t bytes);

 private:
  std::vector<std::byte> host_;
  device::Buffer device_;
};

}  // namespace hoop::runtime
