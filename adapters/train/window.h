// Convolution geometry, shared by the CPU layers and the CUDA kernels (which compile without
// the rest of the training core's headers). Internal to hoop_train.
#pragma once

#include <cstdint>

namespace hoop::train::detail {

/// Geometry of one input plane seen through a square kernel (conv2d's im2col).
struct Window {
  std::int64_t height, width;  // input plane
  std::int64_t kernel, stride, padding;
  std::int64_t out_height, out_width;  // output plane
};

}  // namespace hoop::train::detail
