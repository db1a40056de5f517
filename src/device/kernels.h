// The launchers of the device reduction kernels (reduce_kernels.cu). device_cuda.cc checks the
// arguments first (reduce_checks.h, and that every pointer is memory of the current device), so
// these only pick a kernel and a grid and queue it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/reduce_kernels.h"
#include "hoop/core.h"

namespace hoop::device::kernels {

/// Queues dst[i] = op(a[i], b[i]) on `stream`; dst may be exactly a or b. Returns the launch's
/// error (the kernel's own outcome shows at the next synchronization).
cudaError_t combine(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                    reduce_detail::OpKind op, cudaStream_t stream);

/// Queues buf[i] /= divisor (divisor >= 1).
cudaError_t divide(void* buf, std::size_t count, DataType dtype, std::int64_t divisor,
                   cudaStream_t stream);

/// Queues buf[i] *= factor for a float dtype; cudaErrorInvalidValue for an integer one.
cudaError_t scale(void* buf, std::size_t count, DataType dtype, double factor, cudaStream_t stream);

}  // namespace hoop::device::kernels
