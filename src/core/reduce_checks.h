// The argument checks of reduce.h, shared with the device kernels (src/device) so that a bad
// call fails with the same status on the CPU and on a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/reduce_kernels.h"
#include "hoop/core.h"

namespace hoop::reduce_detail {

/// invalid_argument naming `fn` when `dtype` is no DataType value.
Status check_dtype(std::string_view fn, DataType dtype);

/// Checks reduce_into's arguments (dst[i] = op(dst[i], src[i])); ok for count 0 whatever the
/// pointers, once dtype and op are known values.
Status check_reduce_into(std::string_view fn, const void* dst, const void* src, std::size_t count,
                         DataType dtype, ReduceOp op);

/// Checks reduce's arguments (dst[i] = op(a[i], b[i])); ok for count 0 as above.
Status check_reduce(std::string_view fn, const void* dst, const void* a, const void* b,
                    std::size_t count, DataType dtype, ReduceOp op);

/// Checks divide's arguments: a known dtype, divisor >= 1, and for count > 0 a non-null buffer
/// whose byte size fits std::size_t.
Status check_divide(std::string_view fn, const void* buf, std::size_t count, DataType dtype,
                    std::int64_t divisor);

/// Checks one in-place buffer of `count` elements of a known `dtype`: non-null when count > 0,
/// byte size within std::size_t.
Status check_buffer(std::string_view fn, std::string_view name, const void* buf, std::size_t count,
                    DataType dtype);

/// The kernel column of `op` (kAvg reduces like kSum); `op` must be a known value.
OpKind op_kind(ReduceOp op);

}  // namespace hoop::reduce_detail
