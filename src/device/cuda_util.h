// What the CUDA implementation of hoop::device shares with the rest of hoop's CUDA code.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "hoop/core.h"

namespace hoop::device::detail {

/// Ok for cudaSuccess; otherwise io_error (a driver call failed) naming `call`, the device (unless
/// kCpuDevice) and the CUDA error's name and text.
Status cuda_status(cudaError_t error, std::string_view call, int device = kCpuDevice);

/// The cudaStream_t a caller's handle names: null is the per-thread default stream.
inline cudaStream_t as_stream(void* stream) {
  return stream != nullptr ? static_cast<cudaStream_t>(stream) : cudaStreamPerThread;
}

}  // namespace hoop::device::detail
