// hoop::train::Tensor: shape bookkeeping over a std::vector<float> on the CPU or device
// storage on a CUDA device, and the device names of the training core.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "gpu.h"
#include "hoop/hoop.h"
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

namespace detail {

Error unusable_device(int device, const std::string& why) {
  return Error(invalid_argument(fmt::format("cuda:{} is not usable: {}", device, why)));
}

DeviceStorage::DeviceStorage(int device, std::size_t count) : device_(device) {
  Gpu& g = gpu(device);  // throws for an unusable device, even for no elements
  if (count == 0) return;
  data_ = static_cast<float*>(g.allocate(count * sizeof(float)));
  size_ = count;
  g.fill(data_, count, 0.0f);
}

DeviceStorage::DeviceStorage(const DeviceStorage& other) : DeviceStorage() { *this = other; }

DeviceStorage& DeviceStorage::operator=(const DeviceStorage& other) {
  if (this == &other) return *this;
  // Storage of the same size on the same device is reused: layers copy their input into
  // their cache every step.
  if (device_ != other.device_ || size_ != other.size_) {
    DeviceStorage fresh;
    if (other.device_ != kCpuDevice) fresh = DeviceStorage(other.device_, other.size_);
    *this = std::move(fresh);
  }
  if (size_ > 0) gpu(device_).copy(data_, other.data_, size_ * sizeof(float));
  return *this;
}

DeviceStorage::DeviceStorage(DeviceStorage&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(std::exchange(other.device_, kCpuDevice)) {}

DeviceStorage& DeviceStorage::operator=(DeviceStorage&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(device_, other.device_);
  return *this;
}

DeviceStorage::~DeviceStorage() {
  if (data_ != nullptr) gpu(device_).release(data_);
}

}  // namespace detail

Tensor::Tensor(std::vector<std::int64_t> shape, int device) : shape_(std::move(shape)) {
  const std::size_t count = element_count(shape_);
  if (device == kCpuDevice) {
    data_.assign(count, 0.0f);
  } else {
    storage_ = detail::DeviceStorage(device, count);
  }
}

std::int64_t Tensor::dim(int i) const {
  const int rank = static_cast<int>(shape_.size());
  const int index = i < 0 ? i + rank : i;
  if (index < 0 || index >= rank) {
    throw Error(invalid_argument(
        fmt::format("dimension {} is out of range for tensor of shape {}", i, shape_string())));
  }
  return shape_[static_cast<std::size_t>(index)];
}

void Tensor::fill(float v) {
  if (is_cuda()) {
    if (size() > 0) detail::gpu(device()).fill(data(), size(), v);
    return;
  }
  std::fill(data_.begin(), data_.end(), v);
}

Tensor Tensor::to(int device) const {
  if (device == this->device()) return *this;
  if (is_cuda() && device != kCpuDevice) return to(kCpuDevice).to(device);  // through the host
  Tensor out(shape_, device);
  if (size() == 0) return out;
  if (is_cuda()) {
    detail::gpu(this->device()).download(out.data(), data(), bytes());
  } else {
    detail::gpu(device).upload(out.data(), data(), bytes());
  }
  return out;
}

Tensor Tensor::reshaped(std::vector<std::int64_t> shape) const {
  Tensor out = *this;
  out.reshape(std::move(shape));
  return out;
}

void Tensor::reshape(std::vector<std::int64_t> shape) {
  if (element_count(shape) != size()) {
    throw Error(invalid_argument(fmt::format("cannot reshape tensor of shape {} to {}",
                                             shape_string(), format_shape(shape))));
  }
  shape_ = std::move(shape);
}

hoop::Tensor Tensor::view() { return hoop::Tensor{data(), DataType::kF32, shape_, device()}; }

std::string Tensor::shape_string() const { return format_shape(shape_); }

int parse_device(const std::string& spec, int local_rank) {
  if (spec == "cpu") return kCpuDevice;
  int index = -1;
  if (spec != "cuda") {
    constexpr std::string_view kPrefix = "cuda:";
    const char* end = spec.data() + spec.size();
    const bool cuda_n = spec.starts_with(kPrefix);
    const auto [ptr, ec] = cuda_n ? std::from_chars(spec.data() + kPrefix.size(), end, index)
                                  : std::from_chars(end, end, index);
    if (!cuda_n || ec != std::errc() || ptr != end || index < 0) {
      throw Error(
          invalid_argument(fmt::format("device \"{}\": expected cpu, cuda or cuda:N", spec)));
    }
  }
  const int count = cuda_device_count();
  if (count == 0) {
    throw Error(invalid_argument(
        fmt::format("device \"{}\": no usable CUDA device: {}", spec, cuda_unavailable_reason())));
  }
  if (index >= count) {
    throw Error(invalid_argument(
        fmt::format("device \"{}\": this process sees {} CUDA device(s), cuda:0 to cuda:{}", spec,
                    count, count - 1)));
  }
  return index >= 0 ? index : std::max(local_rank, 0) % count;
}

void synchronize(int device) {
  if (device != kCpuDevice) detail::gpu(device).synchronize();
}

}  // namespace hoop::train
