// Helpers shared by the CUDA implementation of hoop::device (device_cuda.cc, device_memory.cc).
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "hoop/core.h"

namespace hoop::device::detail {

/// Ok for cudaSuccess; otherwise io_error (a driver call failed) naming `call`, the device (unless
/// kCpuDevice) and the CUDA error's name and text.
Status cuda_status(cudaError_t error, std::string_view call, int device = kCpuDevice);

/// Ok when `device` is a CUDA device this process can use; otherwise invalid_argument naming
/// `fn` and why (no device at all, with unavailable_reason(), or an ordinal out of range).
Status check_device(std::string_view fn, int device);

/// The cudaStream_t a caller's handle names: null is the per-thread default stream.
inline cudaStream_t as_stream(void* stream) {
  return stream != nullptr ? static_cast<cudaStream_t>(stream) : cudaStreamPerThread;
}

/// Makes a device current for the scope's lifetime and then restores the caller's, so that
/// creating a stream or buffer on another device leaves the thread's current device alone.
class DeviceScope {
 public:
  DeviceScope() = default;
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope();

  /// Switches to `device` (a no-op when it is current already).
  Status enter(int device);

 private:
  int previous_ = kCpuDevice;
};

}  // namespace hoop::device::detail
