// Tests of linear, relu, flatten and dropout: values, gradients, caches and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.h"
#include "hoop/train.h"

namespace hoop::train {
namespace {

using testing::error_of;

using ::testing::AllOf;
using testing::check_layer_gradients;
using ::testing::HasSubstr;
using testing::random_tensor;

// The message of the hoop::Error that `f` throws (fails the test when it throws none).
TEST(LinearTest, InitialisesLikePyTorch) {
  std::mt19937_64 rng(7);
  auto layer = linear(9, 4, rng);
  // PyTorch: weight ~ U(-1/sqrt(in), 1/sqrt(in)), then bias with the same bound.
  std::mt19937_64 replay(7);
  std::uniform_real_distribution<float> uniform(-1.0f / 3.0f, 1.0f / 3.0f);
  auto params = layer->parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "weight");
  EXPECT_EQ(params[0]->value.shape_string(), "[4, 9]");
  EXPECT_EQ(params[1]->name, "bias");
  EXPECT_EQ(params[1]->value.shape_string(), "[4]");
  for (std::size_t i = 0; i < 36; ++i) EXPECT_EQ(params[0]->value[i], uniform(replay));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(params[1]->value[i], uniform(replay));
  for (std::size_t i = 0; i < 36; ++i) EXPECT_EQ(params[0]->grad[i], 0.0f);
}

TEST(LinearTest, ForwardComputesAffineMap) {
  std::mt19937_64 rng(1);
  auto layer = linear(3, 2, rng);
  auto params = layer->parameters();
  const float w[] = {1, 2, 3, -1, 0, 1};
  for (int i = 0; i < 6; ++i) params[0]->value[i] = w[i];
  params[1]->value[0] = 0.5f;
  params[1]->value[1] = -2.0f;
  Tensor x({2, 3});
  const float xs[] = {1, 1, 1, 2, 0, -1};
  for (int i = 0; i < 6; ++i) x[i] = xs[i];
  const Tensor y = layer->forward(x, false);
  EXPECT_EQ(y.shape_string(), "[2, 2]");
  EXPECT_FLOAT_EQ(y[0], 6.5f);
  EXPECT_FLOAT_EQ(y[1], -2.0f);
  EXPECT_FLOAT_EQ(y[2], -0.5f);
  EXPECT_FLOAT_EQ(y[3], -5.0f);
}

TEST(LinearTest, GradientsMatchCentralDifferences) {
  std::mt19937_64 rng(2);
  auto layer = linear(6, 5, rng);
  check_layer_gradients(*layer, random_tensor({4, 6}, 3), 1e-2f);
}

TEST(LinearTest, GradientsAccumulateOverBackwardPasses) {
  std::mt19937_64 rng(2);
  auto layer = linear(6, 5, rng);
  const Tensor x = random_tensor({4, 6}, 3);
  const Tensor dy = random_tensor({4, 5}, 4);
  layer->forward(x, true);
  layer->backward(dy);
  auto params = layer->parameters();
  const Tensor once_w = params[0]->grad;
  const Tensor once_b = params[1]->grad;
  layer->forward(x, true);
  layer->backward(dy);
  for (std::size_t i = 0; i < once_w.size(); ++i) {
    EXPECT_FLOAT_EQ(params[0]->grad[i], 2 * once_w[i]);
  }
  for (std::size_t i = 0; i < once_b.size(); ++i) {
    EXPECT_FLOAT_EQ(params[1]->grad[i], 2 * once_b[i]);
  }
}

TEST(LinearTest, ActivationBytesOnlyAfterTrainingForward) {
  std::mt19937_64 rng(2);
  auto layer = linear(6, 5, rng);
  EXPECT_EQ(layer->activation_bytes(), 0u);
  layer->forward(Tensor({4, 6}), true);
  EXPECT_EQ(layer->activation_bytes(), 4 * 6 * sizeof(float));
  layer->forward(Tensor({4, 6}), false);
  EXPECT_EQ(layer->activation_bytes(), 0u);
  EXPECT_THAT(error_of([&] {
                layer->backward(Tensor({4, 5}));
              }),
              HasSubstr("without a preceding training forward"));
}

TEST(LinearTest, BadShapesNameLayerAndShapes) {
  std::mt19937_64 rng(2);
  auto layer = linear(4, 3, rng);
  EXPECT_THAT(error_of([&] {
                layer->forward(Tensor({2, 5}), true);
              }),
              AllOf(HasSubstr("linear(4 -> 3)"), HasSubstr("[N, 4]"), HasSubstr("[2, 5]")));
  EXPECT_THAT(error_of([&] { layer->forward(Tensor({2, 1, 4}), true); }), HasSubstr("[2, 1, 4]"));
  layer->forward(Tensor({2, 4}), true);
  EXPECT_THAT(error_of([&] {
                layer->backward(Tensor({2, 4}));
              }),
              AllOf(HasSubstr("linear(4 -> 3)"), HasSubstr("[2, 3]"), HasSubstr("[2, 4]")));
  EXPECT_THAT(error_of([&] { linear(0, 3, rng); }), HasSubstr("in_features"));
}

TEST(ReluTest, ForwardAndGradients) {
  auto layer = relu();
  Tensor x = random_tensor({3, 7}, 5);
  // Keep inputs clear of the kink at 0 so central differences with eps 1e-2 stay exact.
  for (std::size_t i = 0; i < x.size(); ++i) x[i] += x[i] >= 0 ? 0.1f : -0.1f;
  const Tensor y = layer->forward(x, false);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], std::max(x[i], 0.0f));
  check_layer_gradients(*layer, x, 1e-2f);
  EXPECT_EQ(layer->activation_bytes(), x.size());
  layer->forward(x, false);
  EXPECT_EQ(layer->activation_bytes(), 0u);
}

TEST(FlattenTest, ReshapesAndRestoresShape) {
  auto layer = flatten();
  const Tensor x = random_tensor({2, 3, 4, 5}, 6);
  const Tensor y = layer->forward(x, true);
  EXPECT_EQ(y.shape_string(), "[2, 60]");
  EXPECT_EQ(y[17], x[17]);
  const Tensor dx = layer->backward(y);
  EXPECT_EQ(dx.shape_string(), "[2, 3, 4, 5]");
  check_layer_gradients(*layer, x, 1e-2f);
  EXPECT_EQ(layer->forward(Tensor({0, 1, 28, 28}), false).shape_string(), "[0, 784]");
  layer->forward(x, true);
  EXPECT_THAT(error_of([&] {
                layer->backward(Tensor({2, 59}));
              }),
              AllOf(HasSubstr("[2, 59]"), HasSubstr("[2, 3, 4, 5]")));
}

TEST(DropoutTest, RejectsProbabilityOutsideUnitInterval) {
  EXPECT_THAT(error_of([] { dropout(1.0f, 1); }), HasSubstr("[0, 1)"));
  EXPECT_THAT(error_of([] { dropout(-0.1f, 1); }), HasSubstr("[0, 1)"));
  EXPECT_THAT(error_of([] { dropout(std::nanf(""), 1); }), HasSubstr("[0, 1)"));
}

TEST(DropoutTest, IdentityInEvaluation) {
  auto layer = dropout(0.5f, 3);
  const Tensor x = random_tensor({8, 16}, 7);
  const Tensor y = layer->forward(x, false);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i]);
  EXPECT_EQ(layer->activation_bytes(), 0u);
}

TEST(DropoutTest, DropsAboutPAndScalesTheRest) {
  auto layer = dropout(0.25f, 3);
  const Tensor x = random_tensor({100, 100}, 8, 0.5f, 1.0f);
  const Tensor y = layer->forward(x, true);
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (y[i] == 0) {
      ++dropped;
    } else {
      EXPECT_FLOAT_EQ(y[i], x[i] / 0.75f);
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / x.size(), 0.25, 0.02);
  EXPECT_EQ(layer->activation_bytes(), x.size());
  // A second draw gives a different mask.
  const Tensor y2 = layer->forward(x, true);
  std::size_t same = 0;
  for (std::size_t i = 0; i < x.size(); ++i) same += (y[i] == 0) == (y2[i] == 0);
  EXPECT_LT(same, x.size());
}

TEST(DropoutTest, GradientsMatchCentralDifferencesUnderFixedMask) {
  // A fresh layer with the same seed draws the same mask, so the loss is a fixed function.
  const Tensor x0 = random_tensor({5, 9}, 9, 0.5f, 1.0f);
  const Tensor r = random_tensor({5, 9}, 10);
  auto layer = dropout(0.4f, 11);
  layer->forward(x0, true);
  const Tensor dx = layer->backward(r);
  Tensor x = x0;
  const auto loss = [&] { return testing::dot(dropout(0.4f, 11)->forward(x, true), r); };
  testing::expect_close(dx, testing::numerical_gradient(x, loss, 1e-2f), "dropout input");
}

}  // namespace
}  // namespace hoop::train
