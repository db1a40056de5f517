// Tests of softmax_cross_entropy and count_correct.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.h"
#include "hoop/train.h"

namespace hoop::train {
namespace {

using testing::error_of;

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(SoftmaxCrossEntropyTest, UniformLogitsGiveLogClasses) {
  Tensor logits({2, 4});
  Tensor grad;
  const float loss = softmax_cross_entropy(logits, {1, 3}, &grad);
  EXPECT_NEAR(loss, std::log(4.0f), 1e-6);
  ASSERT_EQ(grad.shape_string(), "[2, 4]");
  // (softmax - onehot) / N
  EXPECT_FLOAT_EQ(grad[0], 0.125f);
  EXPECT_FLOAT_EQ(grad[1], -0.375f);
  EXPECT_FLOAT_EQ(grad[7], -0.375f);
  EXPECT_FLOAT_EQ(grad[4], 0.125f);
}

TEST(SoftmaxCrossEntropyTest, StableForLargeLogits) {
  Tensor logits({2, 2});
  logits[0] = 1000;
  logits[1] = 0;
  logits[2] = -1000;
  logits[3] = 1000;
  Tensor grad;
  // Row 0 is right with certainty, row 1 wrong by 2000.
  const float loss = softmax_cross_entropy(logits, {0, 0}, &grad);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, 1000.0f, 1e-2);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(grad[i]));
  EXPECT_NEAR(grad[2], -0.5f, 1e-6);
  EXPECT_NEAR(grad[3], 0.5f, 1e-6);
}

TEST(SoftmaxCrossEntropyTest, GradientMatchesCentralDifferences) {
  Tensor logits = testing::random_tensor({5, 7}, 41, -3, 3);
  const std::vector<int> labels = {0, 6, 3, 3, 2};
  Tensor grad;
  softmax_cross_entropy(logits, labels, &grad);
  const auto loss = [&] {
    return static_cast<double>(softmax_cross_entropy(logits, labels, nullptr));
  };
  testing::expect_close(grad, testing::numerical_gradient(logits, loss, 1e-3f), "logits", 1e-2,
                        2e-4);
}

TEST(SoftmaxCrossEntropyTest, RejectsBadLabelsAndShapes) {
  Tensor logits({3, 10});
  EXPECT_THAT(error_of([&] {
                softmax_cross_entropy(logits, {1, 2, 10}, nullptr);
              }),
              AllOf(HasSubstr("label 10"), HasSubstr("row 2"), HasSubstr("[0, 10)")));
  EXPECT_THAT(error_of([&] {
                softmax_cross_entropy(logits, {-1, 2, 3}, nullptr);
              }),
              AllOf(HasSubstr("label -1"), HasSubstr("row 0")));
  EXPECT_THAT(error_of([&] {
                softmax_cross_entropy(logits, {1, 2}, nullptr);
              }),
              AllOf(HasSubstr("2 labels"), HasSubstr("[3, 10]")));
  EXPECT_THAT(error_of([&] {
                softmax_cross_entropy(Tensor({3, 2, 5}), {1, 2, 3}, nullptr);
              }),
              HasSubstr("[3, 2, 5]"));
  EXPECT_THAT(error_of([&] { count_correct(logits, {1}); }), HasSubstr("1 labels"));
}

TEST(CountCorrectTest, CountsRowsWhoseArgmaxIsTheLabel) {
  Tensor logits({3, 3});
  const float values[] = {0.1f, 0.7f, 0.2f, 2, 1, 0, -1, -2, -0.5f};
  for (int i = 0; i < 9; ++i) logits[i] = values[i];
  EXPECT_EQ(count_correct(logits, {1, 0, 2}), 3u);
  EXPECT_EQ(count_correct(logits, {1, 1, 0}), 1u);
  EXPECT_EQ(count_correct(Tensor({0, 3}), {}), 0u);
}

}  // namespace
}  // namespace hoop::train
