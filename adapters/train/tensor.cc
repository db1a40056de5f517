// hoop::train::Tensor: shape bookkeeping over a std::vector<float>.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "hoop/train.h"

namespace hoop::train {
namespace {

std::string format_shape(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Throws for a negative dimension rather than letting the product wrap into a huge size.
std::size_t element_count(const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) {
      throw Error(invalid_argument(
          fmt::format("tensor shape {} has a negative dimension", format_shape(shape))));
    }
    n *= static_cast<std::size_t>(d);
  }
  return n;
}

}  // namespace

Tensor::Tensor(std::vector<std::int64_t> shape)
    : shape_(std::move(shape)), data_(element_count(shape_), 0.0f) {}

std::int64_t Tensor::dim(int i) const {
  const int rank = static_cast<int>(shape_.size());
  const int index = i < 0 ? i + rank : i;
  if (index < 0 || index >= rank) {
    throw Error(invalid_argument(
        fmt::format("dimension {} is out of range for tensor of shape {}", i, shape_string())));
  }
  return shape_[static_cast<std::size_t>(index)];
}

void Tensor::fill(float v) { std::fill(data_.begin(), data_.end(), v); }

Tensor Tensor::reshaped(std::vector<std::int64_t> shape) const {
  Tensor out = *this;
  out.reshape(std::move(shape));
  return out;
}

void Tensor::reshape(std::vector<std::int64_t> shape) {
  if (element_count(shape) != data_.size()) {
    throw Error(invalid_argument(fmt::format("cannot reshape tensor of shape {} to {}",
                                             shape_string(), format_shape(shape))));
  }
  shape_ = std::move(shape);
}

hoop::Tensor Tensor::view() {
  return hoop::Tensor{data_.data(), DataType::kF32, shape_, kCpuDevice};
}

std::string Tensor::shape_string() const { return format_shape(shape_); }

}  // namespace hoop::train
