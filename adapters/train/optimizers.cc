// SGD (with momentum) and Adam, with PyTorch's update rules, so that a model trained here and
// the same model trained with torch.optim from the same initial weights follow the same path.
#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu.h"
#include "hoop/train.h"
#include "layer_util.h"

namespace hoop::train {

void Optimizer::zero_grad() {
  for (Parameter* p : params_) p->grad.fill(0.0f);
}

namespace {

// Arguments are checked when the optimizer is built: a negative learning rate or a beta of 1
// would otherwise show up only as a diverging (or frozen) loss many steps later.
void check_arg(std::string_view optimizer, std::string_view name, float value, bool ok,
               std::string_view requirement) {
  if (!ok) {
    throw Error(invalid_argument(
        fmt::format("{}: {} must be {}, got {}", optimizer, name, requirement, value)));
  }
}

void check_params(std::string_view what, const std::vector<Parameter*>& params) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Parameter* p = params[i];
    if (p == nullptr)
      throw Error(invalid_argument(fmt::format("{}: parameter {} is null", what, i)));
    if (p->grad.shape() != p->value.shape()) {
      throw Error(
          invalid_argument(fmt::format("{}: parameter {} has value {} but gradient {}", what,
                                       p->name, p->value.shape_string(), p->grad.shape_string())));
    }
    if (p->grad.device() != p->value.device()) {
      throw Error(invalid_argument(fmt::format(
          "{}: parameter {} has its value on {} but its gradient on {}", what, p->name,
          detail::device_name(p->value.device()), detail::device_name(p->grad.device()))));
    }
  }
}

// One state tensor per parameter, as large as the parameter's value and on its device.
std::vector<Tensor> zero_state(const std::vector<Parameter*>& params) {
  std::vector<Tensor> state;
  state.reserve(params.size());
  for (const Parameter* p : params) state.emplace_back(p->value.shape(), p->value.device());
  return state;
}

// The state was made where the parameters were when the optimizer was built; a model moved
// since would have its state read from the wrong memory.
void check_moved(std::string_view optimizer, const Parameter& p, const Tensor& state) {
  if (p.value.device() != state.device()) {
    throw Error(invalid_argument(fmt::format(
        "{}: parameter {} moved to {} after the optimizer was built on {}; build the optimizer "
        "after Sequential::to()",
        optimizer, p.name, detail::device_name(p.value.device()),
        detail::device_name(state.device()))));
  }
}

std::size_t total_bytes(const std::vector<Tensor>& state) {
  std::size_t bytes = 0;
  for (const Tensor& t : state) bytes += t.bytes();
  return bytes;
}

// One StateBuffer per tensor of `state`, named by `prefix` and the parameter's index.
std::vector<Optimizer::StateBuffer> buffers_of(const std::string& prefix,
                                               std::vector<Tensor>& state) {
  std::vector<Optimizer::StateBuffer> buffers;
  for (std::size_t k = 0; k < state.size(); ++k) {
    buffers.push_back(
        {prefix + std::to_string(k), state[k].data(), state[k].bytes(), state[k].device()});
  }
  return buffers;
}

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<Parameter*> params, float lr, float momentum, float weight_decay)
      : Optimizer(std::move(params), lr), momentum_(momentum), weight_decay_(weight_decay) {
    if (momentum_ != 0.0f) buffers_ = zero_state(params_);
  }

  void step() override {
    for (std::size_t k = 0; k < params_.size(); ++k) {
      Parameter& p = *params_[k];
      float* w = p.value.data();
      const float* grad = p.grad.data();
      const std::size_t n = p.value.size();
      if (momentum_ != 0.0f) check_moved("sgd", p, buffers_[k]);
      if (p.value.is_cuda()) {
        float* v = momentum_ == 0.0f ? nullptr : buffers_[k].data();
        detail::gpu(p.value.device()).sgd_step(w, grad, v, n, lr_, momentum_, weight_decay_);
        continue;
      }
      if (momentum_ == 0.0f) {
        for (std::size_t i = 0; i < n; ++i) w[i] -= lr_ * (grad[i] + weight_decay_ * w[i]);
        continue;
      }
      float* v = buffers_[k].data();
      // PyTorch starts the buffer as a copy of the first gradient; a zero buffer gives the
      // same v = momentum * 0 + g = g exactly, so the first step needs no special case.
      for (std::size_t i = 0; i < n; ++i) {
        const float g = grad[i] + weight_decay_ * w[i];
        v[i] = momentum_ * v[i] + g;
        w[i] -= lr_ * v[i];
      }
    }
  }

  std::size_t state_bytes() const override { return total_bytes(buffers_); }
  std::vector<StateBuffer> state() override { return buffers_of("sgd.momentum.", buffers_); }

 private:
  float momentum_;
  float weight_decay_;
  std::vector<Tensor> buffers_;  // empty without momentum
};

class Adam final : public Optimizer {
 public:
  Adam(std::vector<Parameter*> params, float lr, float beta1, float beta2, float eps,
       float weight_decay)
      : Optimizer(std::move(params), lr),
        beta1_(beta1),
        beta2_(beta2),
        eps_(eps),
        weight_decay_(weight_decay),
        m_(zero_state(params_)),
        v_(zero_state(params_)) {}

  void step() override {
    ++t_;
    // Bias corrections in double: beta2^t for small t is 1 - tiny, where float loses digits.
    const double correction1 = 1.0 - std::pow(static_cast<double>(beta1_), t_);
    const double correction2 = 1.0 - std::pow(static_cast<double>(beta2_), t_);
    // PyTorch's form: w -= (lr / c1) * m / (sqrt(v) / sqrt(c2) + eps).
    const float step_size = static_cast<float>(lr_ / correction1);
    const float sqrt_c2 = static_cast<float>(std::sqrt(correction2));
    for (std::size_t k = 0; k < params_.size(); ++k) {
      Parameter& p = *params_[k];
      float* w = p.value.data();
      const float* grad = p.grad.data();
      float* m = m_[k].data();
      float* v = v_[k].data();
      const std::size_t n = p.value.size();
      check_moved("adam", p, m_[k]);
      if (p.value.is_cuda()) {
        detail::gpu(p.value.device())
            .adam_step(w, grad, m, v, n, step_size, beta1_, beta2_, eps_, weight_decay_, sqrt_c2);
        continue;
      }
      for (std::size_t i = 0; i < n; ++i) {
        const float g = grad[i] + weight_decay_ * w[i];
        m[i] = beta1_ * m[i] + (1.0f - beta1_) * g;
        v[i] = beta2_ * v[i] + (1.0f - beta2_) * g * g;
        w[i] -= step_size * m[i] / (std::sqrt(v[i]) / sqrt_c2 + eps_);
      }
    }
  }

  std::size_t state_bytes() const override { return total_bytes(m_) + total_bytes(v_); }
  std::vector<StateBuffer> state() override {
    std::vector<StateBuffer> all = buffers_of("adam.m.", m_);
    for (StateBuffer& b : buffers_of("adam.v.", v_)) all.push_back(std::move(b));
    all.push_back({"adam.t", &t_, sizeof t_, kCpuDevice});
    return all;
  }

 private:
  float beta1_;
  float beta2_;
  float eps_;
  float weight_decay_;
  std::vector<Tensor> m_;  // first moments
  std::vector<Tensor> v_;  // second moments
  int t_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> sgd(std::vector<Parameter*> params, float lr, float momentum,
                               float weight_decay) {
  // The negated comparisons also reject NaN.
  check_arg("sgd", "lr", lr, lr > 0.0f, "> 0");
  check_arg("sgd", "momentum", momentum, momentum >= 0.0f && momentum < 1.0f, "in [0, 1)");
  check_arg("sgd", "weight_decay", weight_decay, weight_decay >= 0.0f, ">= 0");
  check_params("sgd", params);
  return std::make_unique<Sgd>(std::move(params), lr, momentum, weight_decay);
}

std::unique_ptr<Optimizer> adam(std::vector<Parameter*> params, float lr, float beta1, float beta2,
                                float eps, float weight_decay) {
  check_arg("adam", "lr", lr, lr > 0.0f, "> 0");
  check_arg("adam", "beta1", beta1, beta1 >= 0.0f && beta1 < 1.0f, "in [0, 1)");
  check_arg("adam", "beta2", beta2, beta2 >= 0.0f && beta2 < 1.0f, "in [0, 1)");
  check_arg("adam", "eps", eps, eps > 0.0f, "> 0");
  check_arg("adam", "weight_decay", weight_decay, weight_decay >= 0.0f, ">= 0");
  check_params("adam", params);
  return std::make_unique<Adam>(std::move(params), lr, beta1, beta2, eps, weight_decay);
}

}  // namespace hoop::train
