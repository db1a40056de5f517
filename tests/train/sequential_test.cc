// Tests of Sequential and the bundled models: naming, hooks, accumulation, gradients.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gradient_check.h"
#include "hoop/train.h"

namespace hoop::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::random_tensor;

std::vector<std::string> names(const std::vector<Parameter*>& params) {
  std::vector<std::string> out;
  for (const Parameter* p : params) out.push_back(p->name);
  return out;
}

// A LeNet-like net shrunk to [N, 1, 8, 8], with stride and padding in the second conv.
Sequential small_conv_net(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Sequential model;
  model.add(conv2d(1, 3, 3, 1, 1, rng));  // [N, 3, 8, 8]
  model.add(relu());
  model.add(max_pool2d(2, 2));            // [N, 3, 4, 4]
  model.add(conv2d(3, 4, 3, 2, 1, rng));  // [N, 4, 2, 2]
  model.add(relu());
  model.add(max_pool2d(2, 2));  // [N, 4, 1, 1]
  model.add(flatten());
  model.add(linear(4, 6, rng));
  model.add(relu());
  model.add(linear(6, 3, rng));
  return model;
}

TEST(SequentialTest, NamesParametersByIndexAndKind) {
  Sequential model = small_conv_net(1);
  EXPECT_THAT(names(model.parameters()),
              ElementsAre("0.conv2d.weight", "0.conv2d.bias", "3.conv2d.weight", "3.conv2d.bias",
                          "7.linear.weight", "7.linear.bias", "9.linear.weight", "9.linear.bias"));
  EXPECT_THAT(names(model.layer_parameters(7)), ElementsAre("7.linear.weight", "7.linear.bias"));
  EXPECT_TRUE(model.layer_parameters(1).empty());
  EXPECT_EQ(model.layer_count(), 10u);
  EXPECT_EQ(model.layer(2).kind(), "max_pool2d");
  EXPECT_EQ(model.parameter_count(), 27u + 3 + 108 + 4 + 24 + 6 + 18 + 3);
}

TEST(SequentialTest, BackwardReportsLayersLastFirstWithFinalGradients) {
  Sequential model = small_conv_net(2);
  const Tensor x = random_tensor({2, 1, 8, 8}, 3);
  Tensor grad;
  softmax_cross_entropy(model.forward(x, true), {0, 2}, &grad);
  std::vector<std::size_t> order;
  model.backward(grad, [&](std::size_t i) {
    order.push_back(i);
    // Layers before i have not run yet: their gradients are still zero.
    if (i > 0) {
      for (Parameter* p : model.layer_parameters(0)) {
        for (std::size_t k = 0; k < p->grad.size(); ++k) ASSERT_EQ(p->grad[k], 0.0f);
      }
    }
  });
  EXPECT_THAT(order, ElementsAre(9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
  // Without a hook backward still runs.
  model.forward(x, true);
  model.backward(grad);
}

TEST(SequentialTest, GradientsAccumulateAndZeroGradClears) {
  Sequential model = small_conv_net(4);
  const Tensor x = random_tensor({3, 1, 8, 8}, 5);
  Tensor grad;
  softmax_cross_entropy(model.forward(x, true), {0, 1, 2}, &grad);
  model.backward(grad);
  std::vector<Tensor> once;
  for (Parameter* p : model.parameters()) once.push_back(p->grad);
  model.forward(x, true);
  model.backward(grad);
  const auto params = model.parameters();
  for (std::size_t j = 0; j < params.size(); ++j) {
    for (std::size_t k = 0; k < once[j].size(); ++k) {
      EXPECT_NEAR(params[j]->grad[k], 2 * once[j][k], 1e-6 + 1e-5 * std::abs(once[j][k]))
          << params[j]->name;
    }
  }
  model.zero_grad();
  for (Parameter* p : params) {
    for (std::size_t k = 0; k < p->grad.size(); ++k) ASSERT_EQ(p->grad[k], 0.0f) << p->name;
  }
}

TEST(SequentialTest, TinyMlpGradientsMatchCentralDifferences) {
  std::mt19937_64 rng(6);
  Sequential model;
  model.add(flatten());
  model.add(linear(12, 7, rng));
  model.add(relu());
  model.add(linear(7, 4, rng));
  testing::check_model_gradients(model, random_tensor({3, 2, 3, 2}, 7), {3, 0, 1}, 1e-3f);
}

TEST(SequentialTest, SmallConvNetGradientsMatchCentralDifferences) {
  Sequential model = small_conv_net(5);
  testing::check_model_gradients(model, random_tensor({2, 1, 8, 8}, 6), {2, 1}, 1e-3f);
}

TEST(ModelsTest, LeNet5ShapesAndParameterCount) {
  Sequential model = make_lenet5(10, 1);
  EXPECT_EQ(model.parameter_count(), 61706u);
  EXPECT_EQ(model.forward(Tensor({3, 1, 28, 28}), false).shape_string(), "[3, 10]");
  EXPECT_EQ(make_lenet5(7, 1).forward(Tensor({2, 1, 28, 28}), false).shape_string(), "[2, 7]");
  EXPECT_THAT(names(model.parameters()),
              ElementsAre("0.conv2d.weight", "0.conv2d.bias", "3.conv2d.weight", "3.conv2d.bias",
                          "7.linear.weight", "7.linear.bias", "9.linear.weight", "9.linear.bias",
                          "11.linear.weight", "11.linear.bias"));
  EXPECT_EQ(model.layer_parameters(3)[0]->value.shape_string(), "[16, 6, 5, 5]");
}

TEST(ModelsTest, MlpAcceptsImagesAndFlatInputs) {
  Sequential model = make_model("mlp", 3);
  EXPECT_EQ(model.parameter_count(), 784u * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  EXPECT_EQ(model.forward(Tensor({2, 1, 28, 28}), false).shape_string(), "[2, 10]");
  EXPECT_EQ(model.forward(Tensor({2, 784}), false).shape_string(), "[2, 10]");
  Sequential with_dropout = make_mlp({32, 16}, 5, 0.5f, 3);
  std::vector<std::string> kinds;
  for (std::size_t i = 0; i < with_dropout.layer_count(); ++i) {
    kinds.push_back(with_dropout.layer(i).kind());
  }
  EXPECT_THAT(kinds, ElementsAre("flatten", "linear", "relu", "dropout", "linear", "relu",
                                 "dropout", "linear"));
}

TEST(ModelsTest, SameSeedSameModel) {
  Sequential a = make_model("lenet5", 11), b = make_model("lenet5", 11), c = make_lenet5(10, 12);
  const auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
  bool differs = false;
  for (std::size_t j = 0; j < pa.size(); ++j) {
    for (std::size_t k = 0; k < pa[j]->value.size(); ++k) {
      ASSERT_EQ(pa[j]->value[k], pb[j]->value[k]);
      differs |= pa[j]->value[k] != pc[j]->value[k];
    }
  }
  EXPECT_TRUE(differs);
}

TEST(ModelsTest, UnknownModelListsKnownOnes) {
  try {
    make_model("resnet", 1);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("resnet"));
    EXPECT_THAT(e.what(), HasSubstr("mlp, lenet5"));
  }
}

TEST(ModelsTest, LeNet5ActivationBytesFollowTrainingMode) {
  Sequential model = make_lenet5(10, 1);
  const Tensor x({4, 1, 28, 28});
  model.forward(x, true);
  std::size_t cached = 0;
  for (std::size_t i = 0; i < model.layer_count(); ++i) cached += model.layer(i).activation_bytes();
  EXPECT_GT(cached, x.bytes());
  model.forward(x, false);
  for (std::size_t i = 0; i < model.layer_count(); ++i) {
    EXPECT_EQ(model.layer(i).activation_bytes(), 0u) << model.layer(i).kind();
  }
}

}  // namespace
}  // namespace hoop::train
