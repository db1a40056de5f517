// Pre- and post-scaling of tensors (Horovod's prescale_factor / postscale_factor).
#pragma once

#include <cstddef>

#include "hoop/core.h"

namespace hoop::runtime {

/// dst[i] = src[i] * factor for a float dtype (f16 and bf16 through f32, rounded to nearest
/// even); a plain copy when factor is 1 (any dtype). dst may be src; other overlaps are not
/// allowed. A factor other than 1 on an integer dtype is invalid_argument.
Status scale_copy(void* dst, const void* src, std::size_t count, DataType dtype, double factor);

}  // namespace hoop::runtime
