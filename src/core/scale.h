// Pre- and post-scaling of tensors (Horovod's prescale_factor / postscale_factor).
#pragma once

#include <cstddef>

#include "hoop/core.h"

namespace hoop {

/// dst[i] = src[i] * factor: float dtypes in their own precision (f16 and bf16 through f32,
/// rounded to nearest even), integer dtypes in float64, truncated toward zero and held within
/// the type's range (as Horovod scales them); a plain copy when factor is 1. dst may be src;
/// other overlaps are not allowed. The buffers need no alignment.
Status scale_copy(void* dst, const void* src, std::size_t count, DataType dtype, double factor);

}  // namespace hoop
