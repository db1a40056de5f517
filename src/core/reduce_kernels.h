// The per-instruction-set kernel tables behind reduce.h. Each variant (reduce_generic.cc,
// reduce_avx2.cc) compiles the same templates from reduce_kernels_impl.h for its target and
// exposes them as one table of function pointers; reduce.cc validates arguments and picks the
// table once, so the hot loops contain no argument checks and no per-element dispatch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hoop/core.h"

namespace hoop::reduce_detail {

/// Columns of a table row; ReduceOp::kAvg uses kSum (averaging divides once at the end).
enum class OpKind : std::uint8_t { kSum, kMin, kMax, kProd };
inline constexpr std::size_t kOpKindCount = 4;
inline constexpr std::size_t kDataTypeCount = 9;

/// dst[i] = op(a[i], b[i]) over `count` elements; dst may equal a or b, pointers any alignment.
using ReduceFn = void (*)(std::byte* dst, const std::byte* a, const std::byte* b,
                          std::size_t count);
/// buf[i] /= divisor over `count` elements; divisor >= 1.
using DivideFn = void (*)(std::byte* buf, std::size_t count, std::int64_t divisor);

/// The kernels of one dtype.
struct DtypeKernels {
  ReduceFn reduce[kOpKindCount];
  DivideFn divide;
};

/// All kernels of one variant, indexed by the DataType enum value.
struct KernelTable {
  DtypeKernels dtype[kDataTypeCount];
};

/// The portable variant; always available.
const KernelTable& generic_kernels();
/// The AVX2 + FMA + F16C variant, or nullptr when this build targets another architecture.
/// The caller must check the CPU before running its kernels.
const KernelTable* avx2_kernels();

}  // namespace hoop::reduce_detail
