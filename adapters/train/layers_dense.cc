// Layers without spatial structure: linear, relu, flatten and dropout.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "blas.h"
#include "gpu.h"
#include "hoop/train.h"
#include "layer_util.h"

namespace hoop::train {
namespace {

using detail::fail;
using detail::gpu;

class Linear final : public Layer {
 public:
  Linear(std::int64_t in, std::int64_t out, std::mt19937_64& rng)
      : in_(in), out_(out), name_(fmt::format("linear({} -> {})", in, out)) {
    detail::require_positive(in, "in_features", name_);
    detail::require_positive(out, "out_features", name_);
    weight_ = detail::make_parameter("weight", {out, in});
    bias_ = detail::make_parameter("bias", {out});
    detail::init_like_pytorch(weight_, bias_, in, rng);
  }

  Tensor forward(const Tensor& input, bool training) override {
    if (input.shape().size() != 2 || input.dim(1) != in_) {
      fail(fmt::format("{}: expected input [N, {}], got {}", name_, in_, input.shape_string()));
    }
    const int device = weight_.value.device();
    detail::require_device(input, device, "the input", "its parameters", name_);
    const std::int64_t n = input.dim(0);
    Tensor output({n, out_}, device);
    // Start every row at the bias and let the GEMM add x W^T on top (beta = 1).
    if (output.is_cuda()) {
      gpu(device).broadcast_rows(output.data(), bias_.value.data(), n, out_);
    } else {
      for (std::int64_t r = 0; r < n; ++r) {
        std::copy_n(bias_.value.data(), out_, output.data() + r * out_);
      }
    }
    blas::gemm_on(device, false, true, n, out_, in_, 1.0f, input.data(), in_, weight_.value.data(),
                  in_, 1.0f, output.data(), out_);
    cached_ = training;
    if (training) input_ = input;
    return output;
  }

  Tensor backward(const Tensor& grad_output) override {
    detail::require_cached(cached_, name_);
    const std::int64_t n = input_.dim(0);
    if (grad_output.shape() != std::vector<std::int64_t>{n, out_}) {
      fail(fmt::format("{}: expected output gradient [{}, {}], got {}", name_, n, out_,
                       grad_output.shape_string()));
    }
    const int device = input_.device();
    detail::require_device(grad_output, device, "the output gradient", "the forward pass", name_);
    // dW += dY^T X, db += column sums of dY, dX = dY W.
    blas::gemm_on(device, true, false, out_, in_, n, 1.0f, grad_output.data(), out_, input_.data(),
                  in_, 1.0f, weight_.grad.data(), in_);
    float* db = bias_.grad.data();
    if (input_.is_cuda()) {
      gpu(device).add_column_sums(db, grad_output.data(), n, out_);
    } else {
      for (std::int64_t r = 0; r < n; ++r) {
        const float* row = grad_output.data() + r * out_;
        for (std::int64_t j = 0; j < out_; ++j) db[j] += row[j];
      }
    }
    Tensor grad_input({n, in_}, device);
    blas::gemm_on(device, false, false, n, in_, out_, 1.0f, grad_output.data(), out_,
                  weight_.value.data(), in_, 0.0f, grad_input.data(), in_);
    return grad_input;
  }

  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  std::string kind() const override { return "linear"; }
  std::size_t activation_bytes() const override { return cached_ ? input_.bytes() : 0; }

 private:
  std::int64_t in_;
  std::int64_t out_;
  std::string name_;
  Parameter weight_;
  Parameter bias_;
  // The last training input; its storage is reused by the next one.
  Tensor input_;
  bool cached_ = false;
};

// What an elementwise mask layer (ReLU, dropout) keeps of its last training forward: one byte
// per element, in host memory on the CPU and device memory on a GPU.
struct Mask {
  std::vector<std::uint8_t> host;
  detail::GpuBuffer gpu;
  std::vector<std::int64_t> shape;
  std::size_t count = 0;
  int device = kCpuDevice;

  // Room for `input`'s mask on its device, remembering its shape.
  std::uint8_t* prepare(const Tensor& input) {
    shape = input.shape();
    count = input.size();
    device = input.device();
    if (!input.is_cuda()) {
      host.resize(count);
      return host.data();
    }
    return gpu.reserve<std::uint8_t>(device, count);
  }
};

// The backward of an elementwise mask: ReLU (scale 1) and dropout (scale 1/(1-p)) pass the
// gradient where their forward kept the input, scaled, and zero elsewhere.
Tensor masked_backward(const char* layer, bool cached, const Mask& mask, float scale,
                       const Tensor& grad_output) {
  detail::require_cached(cached, layer);
  if (grad_output.shape() != mask.shape) {
    fail(fmt::format("{}: expected output gradient {}, got {}", layer,
                     detail::shape_string(mask.shape), grad_output.shape_string()));
  }
  detail::require_device(grad_output, mask.device, "the output gradient", "the forward pass",
                         layer);
  Tensor grad_input(mask.shape, mask.device);
  if (grad_input.is_cuda()) {
    gpu(mask.device)
        .masked_scale(grad_output.data(), mask.gpu.data<std::uint8_t>(), scale, grad_input.data(),
                      mask.count);
    return grad_input;
  }
  for (std::size_t i = 0; i < mask.count; ++i)
    grad_input[i] = mask.host[i] ? grad_output[i] * scale : 0.0f;
  return grad_input;
}

class Relu final : public Layer {
 public:
  Tensor forward(const Tensor& input, bool training) override {
    cached_ = training;
    // One byte per element is all backward needs, a quarter of caching the input.
    std::uint8_t* positive = training ? positive_.prepare(input) : nullptr;
    if (input.is_cuda()) {
      Tensor output(input.shape(), input.device());
      gpu(input.device()).relu(input.data(), output.data(), positive, input.size());
      return output;
    }
    // Copying and clamping in place skips the zero fill of a fresh tensor.
    Tensor output = input;
    float* out = output.data();
    const std::size_t count = output.size();
    for (std::size_t i = 0; i < count; ++i) out[i] = std::max(out[i], 0.0f);
    if (training) {
      const float* in = input.data();
      for (std::size_t i = 0; i < count; ++i) positive[i] = in[i] > 0.0f;
    }
    return output;
  }

  Tensor backward(const Tensor& grad_output) override {
    return masked_backward("relu", cached_, positive_, 1.0f, grad_output);
  }

  std::string kind() const override { return "relu"; }
  std::size_t activation_bytes() const override { return cached_ ? positive_.count : 0; }

 private:
  Mask positive_;
  bool cached_ = false;
};

class Flatten final : public Layer {
 public:
  Tensor forward(const Tensor& input, bool training) override {
    if (input.shape().empty()) fail("flatten: expected input [N, ...], got a scalar []");
    cached_ = training;
    if (training) shape_ = input.shape();
    // The product of the trailing dimensions rather than size() / N, so that an empty batch
    // keeps its feature count and the next layer's shape check still means something.
    std::int64_t features = 1;
    for (std::size_t i = 1; i < input.shape().size(); ++i) features *= input.shape()[i];
    return input.reshaped({input.dim(0), features});
  }

  Tensor backward(const Tensor& grad_output) override {
    detail::require_cached(cached_, "flatten");
    std::size_t count = 1;
    for (std::int64_t d : shape_) count *= static_cast<std::size_t>(d);
    if (grad_output.size() != count) {
      fail(fmt::format("flatten: output gradient {} does not match input {}",
                       grad_output.shape_string(), detail::shape_string(shape_)));
    }
    return grad_output.reshaped(shape_);
  }

  std::string kind() const override { return "flatten"; }

 private:
  std::vector<std::int64_t> shape_;
  bool cached_ = false;
};

class Dropout final : public Layer {
 public:
  Dropout(float p, std::uint64_t seed) : p_(p), seed_(seed), rng_(seed) {
    if (!(p >= 0.0f && p < 1.0f)) fail(fmt::format("dropout: p must be in [0, 1), got {}", p));
  }

  Tensor forward(const Tensor& input, bool training) override {
    cached_ = training;
    if (!training) return input;
    const std::size_t count = input.size();
    std::uint8_t* keep = keep_.prepare(input);
    Tensor output(input.shape(), input.device());
    if (input.is_cuda()) {
      // A GPU cannot follow one sequential generator; its masks come from a hash of (seed,
      // training call, element), reproducible from run to run.
      gpu(input.device()).dropout(input.data(), output.data(), keep, count, p_, seed_, calls_++);
      return output;
    }
    const float scale = 1.0f / (1.0f - p_);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (std::size_t i = 0; i < count; ++i) {
      keep[i] = uniform(rng_) >= p_ ? 1 : 0;
      output[i] = keep[i] ? input[i] * scale : 0.0f;
    }
    return output;
  }

  Tensor backward(const Tensor& grad_output) override {
    return masked_backward("dropout", cached_, keep_, 1.0f / (1.0f - p_), grad_output);
  }

  std::string kind() const override { return "dropout"; }
  std::size_t activation_bytes() const override { return cached_ ? keep_.count : 0; }

 private:
  float p_;
  std::uint64_t seed_;
  std::mt19937_64 rng_;
  std::uint64_t calls_ = 0;  // training forwards on a GPU
  Mask keep_;
  bool cached_ = false;
};

}  // namespace

std::unique_ptr<Layer> linear(std::int64_t in_features, std::int64_t out_features,
                              std::mt19937_64& rng) {
  return std::make_unique<Linear>(in_features, out_features, rng);
}

std::unique_ptr<Layer> relu() { return std::make_unique<Relu>(); }

std::unique_ptr<Layer> flatten() { return std::make_unique<Flatten>(); }

std::unique_ptr<Layer> dropout(float p, std::uint64_t seed) {
  return std::make_unique<Dropout>(p, seed);
}

}  // namespace hoop::train
