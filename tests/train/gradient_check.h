// Central-difference gradient checks for the training core's tests.
//
// A layer is checked through the scalar L = sum(forward(x) * r) for a fixed random r: its
// gradient with respect to the output is r, so backward(r) must return dL/dx and add dL/dW to
// each parameter's grad. Piecewise-linear layers (relu, max-pool) are exact under central
// differences as long as no input crosses a kink, which the tests arrange.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hoop/train.h"

namespace hoop::train::testing {

/// Uniform values in [lo, hi).
inline Tensor random_tensor(std::vector<std::int64_t> shape, std::uint64_t seed, float lo = -1,
                            float hi = 1) {
  Tensor t(std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(lo, hi);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = uniform(rng);
  return t;
}

/// sum(a * b) in double.
inline double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

/// d f / d t[i] for every i, by central differences; t is restored afterwards.
inline std::vector<double> numerical_gradient(Tensor& t, const std::function<double()>& f,
                                              float eps) {
  std::vector<double> g(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    const float saved = t[i];
    t[i] = saved + eps;
    const double plus = f();
    t[i] = saved - eps;
    const double minus = f();
    t[i] = saved;
    g[i] = (plus - minus) / (2.0 * static_cast<double>(eps));
  }
  return g;
}

/// Element-wise |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|).
inline void expect_close(const Tensor& analytic, const std::vector<double>& numeric,
                         const std::string& what, double rtol = 1e-2, double atol = 1e-3) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    const double a = analytic[i];
    const double n = numeric[i];
    if (std::abs(a - n) > atol + rtol * std::max(std::abs(a), std::abs(n)) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << a << ", numerical " << n;
    }
  }
}

/// ||analytic - numeric|| <= rtol * max(||analytic||, ||numeric||): for whole models, where
/// float rounding through several layers makes single small entries noisy.
inline void expect_close_in_norm(const Tensor& analytic, const std::vector<double>& numeric,
                                 const std::string& what, double rtol = 1e-2) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double diff = 0, a2 = 0, n2 = 0;
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    diff += (analytic[i] - numeric[i]) * (analytic[i] - numeric[i]);
    a2 += static_cast<double>(analytic[i]) * analytic[i];
    n2 += numeric[i] * numeric[i];
  }
  EXPECT_GT(a2, 0) << what << ": zero gradient checks nothing";
  EXPECT_LE(std::sqrt(diff), rtol * std::sqrt(std::max(a2, n2))) << what;
}

/// Checks layer.backward against central differences of sum(layer.forward(x) * r), for the
/// input and every parameter. Parameter gradients start from zero.
inline void check_layer_gradients(Layer& layer, Tensor x, float eps, std::uint64_t seed = 99) {
  const Tensor y = layer.forward(x, true);
  const Tensor r = random_tensor(y.shape(), seed);
  for (Parameter* p : layer.parameters()) p->grad.fill(0);
  const Tensor dx = layer.backward(r);
  ASSERT_EQ(dx.shape(), x.shape());
  const auto loss = [&] { return dot(layer.forward(x, true), r); };
  expect_close(dx, numerical_gradient(x, loss, eps), layer.kind() + " input");
  for (Parameter* p : layer.parameters()) {
    expect_close(p->grad, numerical_gradient(p->value, loss, eps), layer.kind() + " " + p->name);
  }
}

/// Checks a model's gradients of softmax_cross_entropy(model(x), labels) for every parameter.
/// A ReLU input or max-pool contest within eps (times the input) of its kink spoils central
/// differences there, so model tests pick seeds that have none; a wrong gradient fails any.
inline void check_model_gradients(Sequential& model, const Tensor& x,
                                  const std::vector<int>& labels, float eps) {
  Tensor grad;
  softmax_cross_entropy(model.forward(x, true), labels, &grad);
  model.zero_grad();
  model.backward(grad);
  const auto loss = [&] {
    return static_cast<double>(softmax_cross_entropy(model.forward(x, true), labels, nullptr));
  };
  for (Parameter* p : model.parameters()) {
    expect_close_in_norm(p->grad, numerical_gradient(p->value, loss, eps), p->name);
  }
}

/// The message of the hoop::Error that f throws, which must be an invalid-argument error;
/// a test failure and "" when f throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no hoop::Error thrown";
  return "";
}

}  // namespace hoop::train::testing
