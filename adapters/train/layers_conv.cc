// Spatial layers: conv2d (im2col + GEMM) and max_pool2d.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "blas.h"
#include "gpu.h"
#include "hoop/train.h"
#include "layer_util.h"

namespace hoop::train {
namespace {

using detail::fail;
using detail::gpu;

using detail::Window;

// Output positions [lo, hi) whose input coordinate o * stride - padding + offset lies in
// [0, extent); the rest read zero padding.
void valid_range(std::int64_t offset, std::int64_t extent, std::int64_t out_extent,
                 std::int64_t stride, std::int64_t padding, std::int64_t& lo, std::int64_t& hi) {
  const std::int64_t shift = padding - offset;  // o * stride >= shift
  lo = shift <= 0 ? 0 : (shift + stride - 1) / stride;
  const std::int64_t last = extent - 1 + padding - offset;  // o * stride <= last
  hi = last < 0 ? 0 : last / stride + 1;
  lo = std::min(lo, out_extent);
  hi = std::clamp(hi, lo, out_extent);
}

// Unfolds one sample [C, H, W] into columns: row (c, ki, kj) holds, for every output
// position, the input value under that kernel tap. Rows have stride `ld` so that several
// samples sit side by side and one GEMM covers the whole chunk.
void im2col(const float* image, std::int64_t channels, const Window& w, float* columns,
            std::int64_t ld) {
  for (std::int64_t c = 0; c < channels; ++c) {
    const float* plane = image + c * w.height * w.width;
    for (std::int64_t ki = 0; ki < w.kernel; ++ki) {
      std::int64_t oh_lo, oh_hi;
      valid_range(ki, w.height, w.out_height, w.stride, w.padding, oh_lo, oh_hi);
      for (std::int64_t kj = 0; kj < w.kernel; ++kj) {
        std::int64_t ow_lo, ow_hi;
        valid_range(kj, w.width, w.out_width, w.stride, w.padding, ow_lo, ow_hi);
        float* row = columns + ((c * w.kernel + ki) * w.kernel + kj) * ld;
        for (std::int64_t oh = 0; oh < w.out_height; ++oh) {
          float* out = row + oh * w.out_width;
          if (oh < oh_lo || oh >= oh_hi) {
            std::fill_n(out, w.out_width, 0.0f);
            continue;
          }
          // Index arithmetic rather than a shifted pointer, which could point before the plane.
          const std::int64_t base = (oh * w.stride - w.padding + ki) * w.width - w.padding + kj;
          std::fill_n(out, ow_lo, 0.0f);
          for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) out[ow] = plane[base + ow * w.stride];
          std::fill(out + ow_hi, out + w.out_width, 0.0f);
        }
      }
    }
  }
}

// The adjoint of im2col: adds every column entry back onto the input pixel it was read from.
void col2im(const float* columns, std::int64_t ld, std::int64_t channels, const Window& w,
            float* image) {
  for (std::int64_t c = 0; c < channels; ++c) {
    float* plane = image + c * w.height * w.width;
    for (std::int64_t ki = 0; ki < w.kernel; ++ki) {
      std::int64_t oh_lo, oh_hi;
      valid_range(ki, w.height, w.out_height, w.stride, w.padding, oh_lo, oh_hi);
      for (std::int64_t kj = 0; kj < w.kernel; ++kj) {
        std::int64_t ow_lo, ow_hi;
        valid_range(kj, w.width, w.out_width, w.stride, w.padding, ow_lo, ow_hi);
        const float* row = columns + ((c * w.kernel + ki) * w.kernel + kj) * ld;
        for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const float* in = row + oh * w.out_width;
          const std::int64_t base = (oh * w.stride - w.padding + ki) * w.width - w.padding + kj;
          for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) plane[base + ow * w.stride] += in[ow];
        }
      }
    }
  }
}

// Output extent of a window sweep; throws when the kernel does not fit even once.
std::int64_t sweep_extent(std::int64_t extent, std::int64_t kernel, std::int64_t stride,
                          std::int64_t padding, const std::string& layer, const Tensor& input) {
  const std::int64_t padded = extent + 2 * padding;
  if (padded < kernel) {
    fail(fmt::format("{}: input {} is smaller than the kernel", layer, input.shape_string()));
  }
  return (padded - kernel) / stride + 1;
}

class Conv2d final : public Layer {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel,
         std::int64_t stride, std::int64_t padding, std::mt19937_64& rng)
      : in_channels_(in_channels),
        out_channels_(out_channels),
        kernel_(kernel),
        stride_(stride),
        padding_(padding),
        name_(fmt::format("conv2d({} -> {}, kernel {}, stride {}, padding {})", in_channels,
                          out_channels, kernel, stride, padding)) {
    detail::require_positive(in_channels, "in_channels", name_);
    detail::require_positive(out_channels, "out_channels", name_);
    detail::require_positive(kernel, "kernel", name_);
    detail::require_positive(stride, "stride", name_);
    if (padding < 0) fail(fmt::format("{}: padding must not be negative", name_));
    taps_ = in_channels * kernel * kernel;
    weight_ = detail::make_parameter("weight", {out_channels, in_channels, kernel, kernel});
    bias_ = detail::make_parameter("bias", {out_channels});
    detail::init_like_pytorch(weight_, bias_, taps_, rng);
  }

  Tensor forward(const Tensor& input, bool training) override {
    if (input.shape().size() != 4 || input.dim(1) != in_channels_) {
      fail(fmt::format("{}: expected input [N, {}, H, W], got {}", name_, in_channels_,
                       input.shape_string()));
    }
    const int device = weight_.value.device();
    detail::require_device(input, device, "the input", "its parameters", name_);
    const Window w = window_for(input);
    const std::int64_t n = input.dim(0);
    const std::int64_t plane = w.out_height * w.out_width;
    Tensor output({n, out_channels_, w.out_height, w.out_width}, device);
    float* const columns = columns_data(device);
    float* const products = products_data(device);
    for (std::int64_t first = 0; first < n; first += chunk_) {
      const std::int64_t count = std::min(chunk_, n - first);
      const std::int64_t ld = count * plane;
      unfold(input, w, first, count);
      // products[o, s * plane + p] = sum_t W[o, t] columns[t, s * plane + p]
      blas::gemm_on(device, false, false, out_channels_, ld, taps_, 1.0f, weight_.value.data(),
                    taps_, columns, ld, 0.0f, products, ld);
      float* const out = output.data() + first * out_channels_ * plane;
      if (output.is_cuda()) {
        gpu(device).add_channel_bias(products, bias_.value.data(), count, out_channels_, plane,
                                     out);
        continue;
      }
      for (std::int64_t s = 0; s < count; ++s) {
        for (std::int64_t o = 0; o < out_channels_; ++o) {
          const float* from = products + o * ld + s * plane;
          float* to = out + (s * out_channels_ + o) * plane;
          const float b = bias_.value[static_cast<std::size_t>(o)];
          for (std::int64_t p = 0; p < plane; ++p) to[p] = from[p] + b;
        }
      }
    }
    cached_ = training;
    // With one chunk the columns still describe this input when backward() comes.
    columns_current_ = training && n <= chunk_;
    if (training) input_ = input;
    return output;
  }

  Tensor backward(const Tensor& grad_output) override {
    detail::require_cached(cached_, name_);
    const Window w = window_for(input_);
    const std::int64_t n = input_.dim(0);
    const std::vector<std::int64_t> expected{n, out_channels_, w.out_height, w.out_width};
    if (grad_output.shape() != expected) {
      fail(fmt::format("{}: expected output gradient {}, got {}", name_,
                       detail::shape_string(expected), grad_output.shape_string()));
    }
    const int device = input_.device();
    detail::require_device(grad_output, device, "the output gradient", "the forward pass", name_);
    const std::int64_t plane = w.out_height * w.out_width;
    const std::int64_t image = in_channels_ * w.height * w.width;
    Tensor grad_input(input_.shape(), device);
    float* db = bias_.grad.data();
    float* const columns = columns_data(device);
    float* const products = products_data(device);
    for (std::int64_t first = 0; first < n; first += chunk_) {
      const std::int64_t count = std::min(chunk_, n - first);
      const std::int64_t ld = count * plane;
      if (!columns_current_) unfold(input_, w, first, count);
      // Gather dY into products with the forward layout [o, s * plane + p]; sum db on the way.
      const float* const dy = grad_output.data() + first * out_channels_ * plane;
      if (input_.is_cuda()) {
        gpu(device).gather_channels(dy, count, out_channels_, plane, products, db);
      } else {
        for (std::int64_t s = 0; s < count; ++s) {
          for (std::int64_t o = 0; o < out_channels_; ++o) {
            const float* from = dy + (s * out_channels_ + o) * plane;
            float* to = products + o * ld + s * plane;
            float sum = 0.0f;
            for (std::int64_t p = 0; p < plane; ++p) {
              to[p] = from[p];
              sum += from[p];
            }
            db[o] += sum;
          }
        }
      }
      // dW += dY columns^T, then the columns are spent and take dcolumns = W^T dY.
      blas::gemm_on(device, false, true, out_channels_, taps_, ld, 1.0f, products, ld, columns, ld,
                    1.0f, weight_.grad.data(), taps_);
      blas::gemm_on(device, true, false, taps_, ld, out_channels_, 1.0f, weight_.value.data(),
                    taps_, products, ld, 0.0f, columns, ld);
      float* const dx = grad_input.data() + first * image;
      if (input_.is_cuda()) {
        gpu(device).col2im(columns, count, in_channels_, w, dx);
        continue;
      }
      for (std::int64_t s = 0; s < count; ++s) {
        col2im(columns + s * plane, ld, in_channels_, w, dx + s * image);
      }
    }
    columns_current_ = false;
    return grad_input;
  }

  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  std::string kind() const override { return "conv2d"; }
  std::size_t activation_bytes() const override { return cached_ ? input_.bytes() : 0; }
  std::size_t workspace_bytes() const override {
    return (columns_.capacity() + products_.capacity()) * sizeof(float) + gpu_columns_.capacity() +
           gpu_products_.capacity();
  }

 private:
  // Samples are unfolded in chunks so the column buffer stays near kColumnBudget floats
  // however large the batch (an evaluation pass may hand over the whole test set).
  static constexpr std::int64_t kColumnBudget = std::int64_t{1} << 21;

  Window window_for(const Tensor& input) {
    Window w{input.dim(2), input.dim(3), kernel_, stride_, padding_, 0, 0};
    w.out_height = sweep_extent(w.height, kernel_, stride_, padding_, name_, input);
    w.out_width = sweep_extent(w.width, kernel_, stride_, padding_, name_, input);
    const std::int64_t per_sample = taps_ * w.out_height * w.out_width;
    chunk_ = std::max<std::int64_t>(1, kColumnBudget / std::max<std::int64_t>(per_sample, 1));
    chunk_ = std::min(chunk_, std::max<std::int64_t>(input.dim(0), 1));
    const auto plane = static_cast<std::size_t>(w.out_height * w.out_width);
    const auto chunk = static_cast<std::size_t>(chunk_);
    const std::size_t column_count = static_cast<std::size_t>(taps_) * plane * chunk;
    const std::size_t product_count = static_cast<std::size_t>(out_channels_) * plane * chunk;
    if (input.is_cuda()) {
      gpu_columns_.reserve(input.device(), column_count * sizeof(float));
      gpu_products_.reserve(input.device(), product_count * sizeof(float));
      return w;
    }
    if (columns_.size() < column_count) columns_.resize(column_count);
    if (products_.size() < product_count) products_.resize(product_count);
    return w;
  }

  float* columns_data(int device) {
    return device == kCpuDevice ? columns_.data() : gpu_columns_.data<float>();
  }
  float* products_data(int device) {
    return device == kCpuDevice ? products_.data() : gpu_products_.data<float>();
  }

  // Writes the columns of samples [first, first + count) of `input` side by side.
  void unfold(const Tensor& input, const Window& w, std::int64_t first, std::int64_t count) {
    const std::int64_t plane = w.out_height * w.out_width;
    const std::int64_t image = in_channels_ * w.height * w.width;
    const float* const images = input.data() + first * image;
    if (input.is_cuda()) {
      gpu(input.device()).im2col(images, count, in_channels_, w, gpu_columns_.data<float>());
      return;
    }
    for (std::int64_t s = 0; s < count; ++s) {
      im2col(images + s * image, in_channels_, w, columns_.data() + s * plane, count * plane);
    }
  }

  std::int64_t in_channels_;
  std::int64_t out_channels_;
  std::int64_t kernel_;
  std::int64_t stride_;
  std::int64_t padding_;
  std::int64_t taps_;  // in_channels * kernel * kernel: the GEMM's inner dimension
  std::string name_;
  Parameter weight_;
  Parameter bias_;
  Tensor input_;
  bool cached_ = false;
  // Workspace reused across calls: unfolded input (later its gradient), and W x columns
  // (later the gathered output gradient); in host memory for CPU inputs, device memory for
  // CUDA ones.
  std::vector<float> columns_;
  std::vector<float> products_;
  detail::GpuBuffer gpu_columns_;
  detail::GpuBuffer gpu_products_;
  std::int64_t chunk_ = 1;
  bool columns_current_ = false;
};

class MaxPool2d final : public Layer {
 public:
  MaxPool2d(std::int64_t kernel, std::int64_t stride)
      : kernel_(kernel),
        stride_(stride),
        name_(fmt::format("max_pool2d(kernel {}, stride {})", kernel, stride)) {
    detail::require_positive(kernel, "kernel", name_);
    detail::require_positive(stride, "stride", name_);
  }

  Tensor forward(const Tensor& input, bool training) override {
    if (input.shape().size() != 4) {
      fail(fmt::format("{}: expected input [N, C, H, W], got {}", name_, input.shape_string()));
    }
    const std::int64_t height = input.dim(2), width = input.dim(3);
    const std::int64_t out_h = sweep_extent(height, kernel_, stride_, 0, name_, input);
    const std::int64_t out_w = sweep_extent(width, kernel_, stride_, 0, name_, input);
    const std::int64_t planes = input.dim(0) * input.dim(1);
    Tensor output({input.dim(0), input.dim(1), out_h, out_w}, input.device());
    cached_ = training;
    if (training) {
      input_shape_ = input.shape();
      output_shape_ = output.shape();
      device_ = input.device();
      argmax_count_ = output.size();
    }
    if (input.is_cuda()) {
      std::uint32_t* argmax = training ? gpu_argmax_.reserve<std::uint32_t>(
                                             input.device(), output.size() * sizeof(std::uint32_t))
                                       : nullptr;
      gpu(input.device())
          .max_pool(input.data(), planes, height, width, kernel_, stride_, out_h, out_w,
                    output.data(), argmax);
      return output;
    }
    if (training) argmax_.resize(output.size());
    float* out = output.data();
    for (std::int64_t pl = 0; pl < planes; ++pl) {
      const float* plane = input.data() + pl * height * width;
      for (std::int64_t oh = 0; oh < out_h; ++oh) {
        for (std::int64_t ow = 0; ow < out_w; ++ow) {
          std::int64_t best = (oh * stride_) * width + ow * stride_;
          for (std::int64_t ki = 0; ki < kernel_; ++ki) {
            const std::int64_t row = (oh * stride_ + ki) * width + ow * stride_;
            for (std::int64_t kj = 0; kj < kernel_; ++kj) {
              if (plane[row + kj] > plane[best]) best = row + kj;
            }
          }
          const std::int64_t o = (pl * out_h + oh) * out_w + ow;
          out[o] = plane[best];
          // Indices within the plane fit 32 bits and halve the cache.
          if (training) argmax_[static_cast<std::size_t>(o)] = static_cast<std::uint32_t>(best);
        }
      }
    }
    return output;
  }

  Tensor backward(const Tensor& grad_output) override {
    detail::require_cached(cached_, name_);
    if (grad_output.shape() != output_shape_) {
      fail(fmt::format("{}: expected output gradient {}, got {}", name_,
                       detail::shape_string(output_shape_), grad_output.shape_string()));
    }
    detail::require_device(grad_output, device_, "the output gradient", "the forward pass", name_);
    Tensor grad_input(input_shape_, device_);
    const std::int64_t in_plane = input_shape_[2] * input_shape_[3];
    const std::int64_t out_plane = grad_output.dim(2) * grad_output.dim(3);
    const std::int64_t planes = input_shape_[0] * input_shape_[1];
    if (grad_input.is_cuda()) {
      gpu(device_).max_pool_backward(grad_output.data(), gpu_argmax_.data<std::uint32_t>(), planes,
                                     in_plane, out_plane, grad_input.data());
      return grad_input;
    }
    for (std::int64_t pl = 0; pl < planes; ++pl) {
      float* to = grad_input.data() + pl * in_plane;
      for (std::int64_t p = 0; p < out_plane; ++p) {
        const auto o = static_cast<std::size_t>(pl * out_plane + p);
        to[argmax_[o]] += grad_output[o];
      }
    }
    return grad_input;
  }

  std::string kind() const override { return "max_pool2d"; }
  std::size_t activation_bytes() const override {
    return cached_ ? argmax_count_ * sizeof(std::uint32_t) : 0;
  }

 private:
  std::int64_t kernel_;
  std::int64_t stride_;
  std::string name_;
  // Each output's index within its input plane, in host or device memory by the input's device.
  std::vector<std::uint32_t> argmax_;
  detail::GpuBuffer gpu_argmax_;
  std::size_t argmax_count_ = 0;
  int device_ = kCpuDevice;
  std::vector<std::int64_t> input_shape_;
  std::vector<std::int64_t> output_shape_;
  bool cached_ = false;
};

}  // namespace

std::unique_ptr<Layer> conv2d(std::int64_t in_channels, std::int64_t out_channels,
                              std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                              std::mt19937_64& rng) {
  return std::make_unique<Conv2d>(in_channels, out_channels, kernel, stride, padding, rng);
}

std::unique_ptr<Layer> max_pool2d(std::int64_t kernel, std::int64_t stride) {
  return std::make_unique<MaxPool2d>(kernel, stride);
}

}  // namespace hoop::train
