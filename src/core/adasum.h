// Adasum's pairwise combination (ReduceOp::kAdasum), the step that the allreduce's
// recursive-doubling exchange applies at every level.
#pragma once

#include <cstddef>

#include "hoop/core.h"

namespace hoop {

/// dst = (1 - d / 2|dst|^2) dst + (1 - d / 2|src|^2) src, with d = dst.src, for floating-point
/// dtypes (f16 and bf16 widened). Dot product and norms accumulate in f64 in index order and
/// each element is combined in f64 and rounded once, so two partners that each combine the
/// other's vector into their own get bit-identical results. A zero vector's coefficient is 1
/// (adasum(a, 0) = a). invalid_argument for integer dtypes, null buffers with count > 0, or
/// dst partially overlapping src.
Status adasum_into(void* dst, const void* src, std::size_t count, DataType dtype);

}  // namespace hoop
