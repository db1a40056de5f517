// Helpers shared by the layer implementations: errors, devices and PyTorch-style initialisation.
// Internal to hoop_train.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hoop/train.h"
#include "window.h"

namespace hoop::train::detail {

/// Throws the training core's one error kind.
[[noreturn]] inline void fail(std::string message) {
  throw Error(invalid_argument(std::move(message)));
}

/// "[32, 1, 28, 28]" for a shape that has no tensor of its own.
inline std::string shape_string(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

/// "cpu" or "cuda:N".
inline std::string device_name(int device) {
  return device == kCpuDevice ? std::string("cpu") : fmt::format("cuda:{}", device);
}

/// Throws unless `t` is on `device`: a layer's input and its parameters, or an output gradient
/// and the forward pass it differentiates, must live on one device.
inline void require_device(const Tensor& t, int device, const char* what, const char* other,
                           const std::string& layer) {
  if (t.device() == device) return;
  fail(fmt::format("{}: {} is on {}, {} on {}", layer, what, device_name(t.device()), other,
                   device_name(device)));
}

/// Throws when a layer is asked for backward() without a training forward() to differentiate.
inline void require_cached(bool cached, const std::string& layer) {
  if (!cached) fail(fmt::format("{}: backward() without a preceding training forward()", layer));
}

/// Throws unless a layer size argument is positive.
inline void require_positive(std::int64_t value, const char* what, const std::string& layer) {
  if (value <= 0) fail(fmt::format("{}: {} must be positive, got {}", layer, what, value));
}

/// PyTorch's default for Linear and Conv2d: kaiming_uniform_(a=sqrt(5)) on the weight and
/// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on the bias; the former reduces to the same bound.
/// Weight first, then bias, so one seed gives one model.
inline void init_like_pytorch(Parameter& weight, Parameter& bias, std::int64_t fan_in,
                              std::mt19937_64& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  std::uniform_real_distribution<float> uniform(-bound, bound);
  for (std::size_t i = 0; i < weight.value.size(); ++i) weight.value[i] = uniform(rng);
  for (std::size_t i = 0; i < bias.value.size(); ++i) bias.value[i] = uniform(rng);
}

/// A parameter named `name` of the given shape with a zero gradient.
inline Parameter make_parameter(const char* name, std::vector<std::int64_t> shape) {
  Parameter p;
  p.name = name;
  p.value = Tensor(shape);
  p.grad = Tensor(std::move(shape));
  return p;
}

}  // namespace hoop::train::detail
