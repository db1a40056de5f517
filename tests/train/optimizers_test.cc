// The optimizers against updates worked out by hand from PyTorch's documented rules (the
// expected values were computed in double precision; the tolerances cover float rounding).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "hoop/train.h"

namespace hoop::train {
namespace {

using testing::error_of;

using ::testing::HasSubstr;

Parameter make_param(const std::string& name, const std::vector<float>& values) {
  Parameter p{name, Tensor({static_cast<std::int64_t>(values.size())}),
              Tensor({static_cast<std::int64_t>(values.size())})};
  for (std::size_t i = 0; i < values.size(); ++i) p.value[i] = values[i];
  return p;
}

void set_grad(Parameter& p, const std::vector<float>& grad) {
  for (std::size_t i = 0; i < grad.size(); ++i) p.grad[i] = grad[i];
}

TEST(Sgd, PlainStepAddsWeightDecayToTheGradient) {
  Parameter p = make_param("w", {1.0f});
  auto opt = sgd({&p}, 0.1f, 0.0f, 0.01f);
  // g = 0.5 + 0.01 * w; w -= 0.1 * g.
  const float expected[] = {0.949f, 0.898051f, 0.847152949f};
  for (float e : expected) {
    set_grad(p, {0.5f});
    opt->step();
    EXPECT_NEAR(p.value[0], e, 1e-6);
  }
  EXPECT_EQ(opt->state_bytes(), 0u);
}

TEST(Sgd, MomentumBufferStartsAsTheFirstGradient) {
  Parameter p = make_param("w", {1.0f});
  auto opt = sgd({&p}, 0.1f, 0.9f);
  // v1 = 0.5 (the first gradient, not a dampened or doubled one), v2 = 0.95, v3 = 1.355.
  const float expected[] = {0.95f, 0.855f, 0.7195f};
  for (float e : expected) {
    set_grad(p, {0.5f});
    opt->step();
    EXPECT_NEAR(p.value[0], e, 1e-6);
  }
}

TEST(Sgd, MomentumWithWeightDecayPerElement) {
  Parameter a = make_param("a", {1.0f, -2.0f});
  Parameter b = make_param("b", {3.0f});
  auto opt = sgd({&a, &b}, 0.1f, 0.9f, 0.1f);
  EXPECT_EQ(opt->state_bytes(), 3 * sizeof(float));
  // Element a[0]: grads 0.5 each step; v = 0.6, 1.134, 1.60326.
  // Element a[1]: lr 0.1, grads 0.5, -1, 0.25; worked out step by step:
  //   g1 = 0.5 - 0.2 = 0.3, v = 0.3, w = -2.03
  //   g2 = -1 - 0.203 = -1.203, v = 0.27 - 1.203 = -0.933, w = -1.9367
  //   g3 = 0.25 - 0.19367 = 0.05633, v = -0.8397 + 0.05633 = -0.78337, w = -1.858363
  // Element b[0]: a zero gradient, so only the decay term moves it (followed alongside).
  const std::vector<std::vector<float>> grads_a = {{0.5f, 0.5f}, {0.5f, -1.0f}, {0.5f, 0.25f}};
  const float expected_a0[] = {0.94f, 0.8266f, 0.666274f};
  const float expected_a1[] = {-2.03f, -1.9367f, -1.858363f};
  float w_b = 3.0f, v_b = 0.0f;
  for (int step = 0; step < 3; ++step) {
    set_grad(a, grads_a[step]);
    b.grad.fill(0.0f);
    opt->step();
    EXPECT_NEAR(a.value[0], expected_a0[step], 1e-5) << "step " << step;
    EXPECT_NEAR(a.value[1], expected_a1[step], 1e-5) << "step " << step;
    const float g = 0.1f * w_b;
    v_b = step == 0 ? g : 0.9f * v_b + g;
    w_b -= 0.1f * v_b;
    EXPECT_NEAR(b.value[0], w_b, 1e-5) << "step " << step;
  }
}

TEST(Sgd, LearningRateChangesTakeEffectOnTheNextStep) {
  Parameter p = make_param("w", {1.0f});
  auto opt = sgd({&p}, 0.1f);
  set_grad(p, {1.0f});
  opt->step();
  opt->set_learning_rate(0.5f);
  EXPECT_EQ(opt->learning_rate(), 0.5f);
  opt->step();
  EXPECT_NEAR(p.value[0], 1.0f - 0.1f - 0.5f, 1e-6);
}

TEST(Adam, MatchesHandComputedSteps) {
  Parameter p = make_param("w", {1.0f});
  auto opt = adam({&p}, 0.1f);
  // Step 1: m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25, w = 1 - 0.1 * 0.5 / 0.5 = 0.9.
  // Step 2: m = 0.02, v = 0.00031225, mhat = 0.105263, vhat = 0.156203, w = 0.873366.
  const float grads[] = {0.5f, -0.25f, 1.0f};
  const float expected[] = {0.900000002f, 0.8733662987f, 0.8075551397f};
  for (int step = 0; step < 3; ++step) {
    set_grad(p, {grads[step]});
    opt->step();
    EXPECT_NEAR(p.value[0], expected[step], 2e-6) << "step " << step;
  }
  EXPECT_EQ(opt->state_bytes(), 2 * sizeof(float));
}

TEST(Adam, WeightDecayAndOtherBetas) {
  Parameter p = make_param("w", {1.0f, -2.0f});
  auto opt = adam({&p}, 0.01f, 0.8f, 0.99f, 1e-3f, 0.1f);
  const float grads[] = {0.5f, -0.25f, 1.0f};
  const float expected0[] = {0.9900166389f, 0.9858390671f, 0.9782030660f};
  const float expected1[] = {-2.0099667774f, -2.0069172195f, -2.0115307043f};
  for (int step = 0; step < 3; ++step) {
    set_grad(p, {grads[step], grads[step]});
    opt->step();
    EXPECT_NEAR(p.value[0], expected0[step], 2e-6) << "step " << step;
    EXPECT_NEAR(p.value[1], expected1[step], 2e-6) << "step " << step;
  }
  EXPECT_EQ(opt->state_bytes(), 4 * sizeof(float));
}

TEST(Optimizer, ZeroGradClearsEveryGradient) {
  Parameter a = make_param("a", {1.0f, 2.0f});
  Parameter b = make_param("b", {3.0f});
  set_grad(a, {4.0f, 5.0f});
  set_grad(b, {6.0f});
  auto opt = adam({&a, &b}, 0.1f);
  ASSERT_EQ(opt->parameters().size(), 2u);
  opt->zero_grad();
  EXPECT_EQ(a.grad[0], 0.0f);
  EXPECT_EQ(a.grad[1], 0.0f);
  EXPECT_EQ(b.grad[0], 0.0f);
  EXPECT_EQ(a.value[1], 2.0f);
}

TEST(Optimizer, RejectsBadArgumentsNamingThem) {
  Parameter p = make_param("w", {1.0f});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(error_of([&] { sgd({&p}, 0.0f); }), HasSubstr("sgd: lr must be > 0, got 0"));
  EXPECT_THAT(error_of([&] { sgd({&p}, nan); }), HasSubstr("lr must be > 0, got nan"));
  EXPECT_THAT(error_of([&] { sgd({&p}, 0.1f, 1.0f); }),
              HasSubstr("momentum must be in [0, 1), got 1"));
  EXPECT_THAT(error_of([&] { sgd({&p}, 0.1f, -0.5f); }), HasSubstr("got -0.5"));
  EXPECT_THAT(error_of([&] { sgd({&p}, 0.1f, 0.9f, -1.0f); }),
              HasSubstr("weight_decay must be >= 0, got -1"));
  EXPECT_THAT(error_of([&] { adam({&p}, -1.0f); }), HasSubstr("adam: lr must be > 0, got -1"));
  EXPECT_THAT(error_of([&] { adam({&p}, 0.1f, 1.0f); }),
              HasSubstr("beta1 must be in [0, 1), got 1"));
  EXPECT_THAT(error_of([&] { adam({&p}, 0.1f, 0.9f, 1.5f); }),
              HasSubstr("beta2 must be in [0, 1), got 1.5"));
  EXPECT_THAT(error_of([&] { adam({&p}, 0.1f, 0.9f, 0.999f, 0.0f); }),
              HasSubstr("eps must be > 0, got 0"));
  EXPECT_THAT(error_of([&] { adam({&p}, 0.1f, 0.9f, 0.999f, 1e-8f, -0.25f); }),
              HasSubstr("weight_decay must be >= 0, got -0.25"));
  EXPECT_NO_THROW(adam({&p}, 0.1f, 0.0f, 0.0f, 1e-8f, 0.0f));
}

TEST(Optimizer, RejectsAGradientShapedUnlikeItsValue) {
  Parameter p{"layer.weight", Tensor({2, 3}), Tensor({3, 2})};
  EXPECT_THAT(error_of([&] { sgd({&p}, 0.1f); }),
              HasSubstr("layer.weight has value [2, 3] but gradient [3, 2]"));
  EXPECT_THAT(error_of([&] { adam({nullptr}, 0.1f); }), HasSubstr("parameter 0 is null"));
}

}  // namespace
}  // namespace hoop::train
