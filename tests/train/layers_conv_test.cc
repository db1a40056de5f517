// Tests of conv2d and max_pool2d: against direct loops, central differences, and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gradient_check.h"
#include "hoop/train.h"

namespace hoop::train {
namespace {

using testing::error_of;

using ::testing::AllOf;
using testing::check_layer_gradients;
using ::testing::HasSubstr;
using testing::random_tensor;

// The textbook six-loop convolution, to check the im2col path against.
Tensor direct_conv(const Tensor& x, const Tensor& w, const Tensor& b, std::int64_t stride,
                   std::int64_t pad) {
  const std::int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const std::int64_t oc = w.dim(0), k = w.dim(2);
  const std::int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (wd + 2 * pad - k) / stride + 1;
  Tensor y({n, oc, oh, ow});
  for (std::int64_t s = 0; s < n; ++s)
    for (std::int64_t o = 0; o < oc; ++o)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double acc = b[o];
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t ki = 0; ki < k; ++ki)
              for (std::int64_t kj = 0; kj < k; ++kj) {
                const std::int64_t r = i * stride - pad + ki, q = j * stride - pad + kj;
                if (r < 0 || r >= h || q < 0 || q >= wd) continue;
                acc += static_cast<double>(x[((s * c + ch) * h + r) * wd + q]) *
                       w[((o * c + ch) * k + ki) * k + kj];
              }
          y[((s * oc + o) * oh + i) * ow + j] = static_cast<float>(acc);
        }
  return y;
}

struct ConvCase {
  std::int64_t in_channels, out_channels, kernel, stride, padding, height, width;
};

class Conv2dCaseTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dCaseTest, ForwardMatchesDirectConvolution) {
  const ConvCase c = GetParam();
  std::mt19937_64 rng(21);
  auto layer = conv2d(c.in_channels, c.out_channels, c.kernel, c.stride, c.padding, rng);
  const Tensor x = random_tensor({3, c.in_channels, c.height, c.width}, 22);
  const Tensor y = layer->forward(x, false);
  auto params = layer->parameters();
  const Tensor expected = direct_conv(x, params[0]->value, params[1]->value, c.stride, c.padding);
  ASSERT_EQ(y.shape(), expected.shape());
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-5) << i;
}

TEST_P(Conv2dCaseTest, GradientsMatchCentralDifferences) {
  const ConvCase c = GetParam();
  std::mt19937_64 rng(23);
  auto layer = conv2d(c.in_channels, c.out_channels, c.kernel, c.stride, c.padding, rng);
  check_layer_gradients(*layer, random_tensor({2, c.in_channels, c.height, c.width}, 24), 1e-2f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2dCaseTest,
                         ::testing::Values(ConvCase{1, 2, 3, 1, 0, 5, 5},
                                           ConvCase{2, 3, 3, 1, 1, 6, 6},
                                           ConvCase{2, 2, 3, 2, 1, 7, 5},
                                           ConvCase{3, 2, 2, 3, 2, 6, 8},
                                           ConvCase{1, 1, 1, 1, 0, 3, 4}));

TEST(Conv2dTest, InitialisesLikePyTorch) {
  std::mt19937_64 rng(5);
  auto layer = conv2d(3, 4, 5, 1, 2, rng);
  auto params = layer->parameters();
  EXPECT_EQ(params[0]->name, "weight");
  EXPECT_EQ(params[0]->value.shape_string(), "[4, 3, 5, 5]");
  EXPECT_EQ(params[1]->value.shape_string(), "[4]");
  std::mt19937_64 replay(5);
  std::uniform_real_distribution<float> uniform(-1.0f / std::sqrt(75.0f), 1.0f / std::sqrt(75.0f));
  for (std::size_t i = 0; i < params[0]->value.size(); ++i) {
    EXPECT_EQ(params[0]->value[i], uniform(replay));
  }
  for (std::size_t i = 0; i < params[1]->value.size(); ++i) {
    EXPECT_EQ(params[1]->value[i], uniform(replay));
  }
}

TEST(Conv2dTest, BatchLargerThanOneColumnChunk) {
  // A 1x1 convolution is y = w x + b per pixel; 3000 samples of 32x32 overflow one chunk of
  // columns, so forward and backward (which must re-unfold each chunk) take the chunked path.
  std::mt19937_64 rng(1);
  auto layer = conv2d(1, 1, 1, 1, 0, rng);
  auto params = layer->parameters();
  params[0]->value[0] = 1.5f;
  params[1]->value[0] = -0.25f;
  const Tensor x = random_tensor({3000, 1, 32, 32}, 2);
  const Tensor y = layer->forward(x, true);
  for (std::size_t i = 0; i < x.size(); i += 97) ASSERT_FLOAT_EQ(y[i], 1.5f * x[i] - 0.25f);
  const Tensor dy = random_tensor(y.shape(), 3);
  const Tensor dx = layer->backward(dy);
  double dw = 0, db = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    dw += static_cast<double>(x[i]) * dy[i];
    db += dy[i];
  }
  for (std::size_t i = 0; i < x.size(); i += 97) ASSERT_FLOAT_EQ(dx[i], 1.5f * dy[i]);
  EXPECT_NEAR(params[0]->grad[0], dw, 1e-3 * std::abs(dw) + 1e-2);
  EXPECT_NEAR(params[1]->grad[0], db, 1e-3 * std::abs(db) + 1e-2);
  // The columns and products of the whole batch would take 2 * x.bytes(); the chunks less.
  EXPECT_LT(layer->workspace_bytes(), 2 * x.bytes());
}

TEST(Conv2dTest, GradientsAccumulateOverBackwardPasses) {
  std::mt19937_64 rng(4);
  auto layer = conv2d(2, 3, 3, 1, 1, rng);
  const Tensor x = random_tensor({2, 2, 5, 5}, 5);
  const Tensor dy = random_tensor({2, 3, 5, 5}, 6);
  layer->forward(x, true);
  layer->backward(dy);
  auto params = layer->parameters();
  const Tensor once_w = params[0]->grad, once_b = params[1]->grad;
  layer->forward(x, true);
  layer->backward(dy);
  for (std::size_t i = 0; i < once_w.size(); ++i) {
    EXPECT_NEAR(params[0]->grad[i], 2 * once_w[i], 1e-5);
  }
  for (std::size_t i = 0; i < once_b.size(); ++i) {
    EXPECT_NEAR(params[1]->grad[i], 2 * once_b[i], 1e-5);
  }
}

TEST(Conv2dTest, CachesAndWorkspace) {
  std::mt19937_64 rng(4);
  auto layer = conv2d(2, 3, 3, 1, 1, rng);
  EXPECT_EQ(layer->workspace_bytes(), 0u);
  const Tensor x({4, 2, 6, 6});
  layer->forward(x, true);
  EXPECT_EQ(layer->activation_bytes(), x.bytes());
  // Columns [2*3*3, 4*36] and products [3, 4*36].
  EXPECT_GE(layer->workspace_bytes(), (18 + 3) * 4 * 36 * sizeof(float));
  layer->forward(x, false);
  EXPECT_EQ(layer->activation_bytes(), 0u);
}

TEST(Conv2dTest, BadShapesNameLayerAndShapes) {
  std::mt19937_64 rng(4);
  auto layer = conv2d(3, 6, 5, 1, 0, rng);
  EXPECT_THAT(
      error_of([&] {
        layer->forward(Tensor({2, 1, 28, 28}), true);
      }),
      AllOf(HasSubstr("conv2d(3 -> 6"), HasSubstr("[N, 3, H, W]"), HasSubstr("[2, 1, 28, 28]")));
  EXPECT_THAT(error_of([&] {
                layer->forward(Tensor({3, 28, 28}), true);
              }),
              HasSubstr("[3, 28, 28]"));
  EXPECT_THAT(error_of([&] {
                layer->forward(Tensor({1, 3, 4, 9}), true);
              }),
              HasSubstr("smaller than the kernel"));
  layer->forward(Tensor({1, 3, 8, 8}), true);
  EXPECT_THAT(error_of([&] {
                layer->backward(Tensor({1, 6, 5, 4}));
              }),
              AllOf(HasSubstr("[1, 6, 4, 4]"), HasSubstr("[1, 6, 5, 4]")));
  EXPECT_THAT(error_of([&] { conv2d(3, 6, 5, 0, 0, rng); }), HasSubstr("stride"));
}

TEST(MaxPool2dTest, ForwardPicksWindowMaxima) {
  auto layer = max_pool2d(2, 2);
  Tensor x({1, 1, 4, 4});
  for (std::size_t i = 0; i < 16; ++i) x[i] = static_cast<float>((i * 7) % 16);
  // Rows: 0 7 14 5 / 12 3 10 1 / 8 15 6 13 / 4 11 2 9
  const Tensor y = layer->forward(x, true);
  EXPECT_EQ(y.shape_string(), "[1, 1, 2, 2]");
  EXPECT_EQ(y[0], 12);
  EXPECT_EQ(y[1], 14);
  EXPECT_EQ(y[2], 15);
  EXPECT_EQ(y[3], 13);
  Tensor dy({1, 1, 2, 2});
  dy.fill(1);
  const Tensor dx = layer->backward(dy);
  EXPECT_EQ(dx[4], 1);
  EXPECT_EQ(dx[2], 1);
  EXPECT_EQ(dx[9], 1);
  EXPECT_EQ(dx[11], 1);
  EXPECT_EQ(dx[0], 0);
  EXPECT_EQ(layer->activation_bytes(), 4 * sizeof(std::uint32_t));
  layer->forward(x, false);
  EXPECT_EQ(layer->activation_bytes(), 0u);
}

TEST(MaxPool2dTest, OutputSizeRoundsDown) {
  EXPECT_EQ(max_pool2d(3, 2)->forward(Tensor({2, 3, 7, 8}), false).shape_string(), "[2, 3, 3, 3]");
  EXPECT_EQ(max_pool2d(2, 2)->forward(Tensor({1, 1, 5, 5}), false).shape_string(), "[1, 1, 2, 2]");
}

Tensor distinct_values(std::vector<std::int64_t> shape, std::uint64_t seed) {
  // A shuffled ramp with steps of 0.05: no ties, and no pair closer than central differences
  // with eps 1e-2 can swap.
  Tensor x(std::move(shape));
  std::vector<float> values(x.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.05f * static_cast<float>(i);
  std::shuffle(values.begin(), values.end(), std::mt19937_64(seed));
  for (std::size_t i = 0; i < values.size(); ++i) x[i] = values[i];
  return x;
}

TEST(MaxPool2dTest, GradientsMatchCentralDifferences) {
  auto pool = max_pool2d(2, 2);
  check_layer_gradients(*pool, distinct_values({2, 3, 6, 6}, 31), 1e-2f);
  // Overlapping windows: one input can win several of them.
  auto overlapping = max_pool2d(3, 2);
  check_layer_gradients(*overlapping, distinct_values({2, 2, 7, 7}, 32), 1e-2f);
}

TEST(MaxPool2dTest, BadShapes) {
  auto layer = max_pool2d(2, 2);
  EXPECT_THAT(error_of([&] {
                layer->forward(Tensor({4, 4}), true);
              }),
              AllOf(HasSubstr("max_pool2d"), HasSubstr("[4, 4]")));
  EXPECT_THAT(error_of([&] {
                layer->forward(Tensor({1, 1, 1, 4}), true);
              }),
              HasSubstr("smaller than the kernel"));
  layer->forward(Tensor({1, 1, 4, 4}), true);
  EXPECT_THAT(error_of([&] {
                layer->backward(Tensor({1, 1, 4, 1}));
              }),
              AllOf(HasSubstr("[1, 1, 2, 2]"), HasSubstr("[1, 1, 4, 1]")));
}

}  // namespace
}  // namespace hoop::train
