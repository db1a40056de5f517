// The training core on a CUDA device against the same computation on the CPU: every layer's
// forward and backward, the loss, the optimizers and a few training steps of each model. Labelled
// gpu; skips with the reason where no CUDA device is usable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "device/device.h"
#include "hoop/train.h"
#include "tests/train/gradient_check.h"

namespace hoop::train {
namespace {

using testing::random_tensor;

constexpr int kGpu = 0;

class TrainGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device::device_count() == 0) {
      GTEST_SKIP() << "no usable CUDA device: " << device::unavailable_reason();
    }
  }
};

// Elementwise |gpu - cpu| <= atol + rtol * |cpu|, after bringing `gpu` to the host.
void expect_near(const Tensor& gpu, const Tensor& cpu, const std::string& what, double atol = 1e-5,
                 double rtol = 1e-4) {
  ASSERT_EQ(gpu.device(), kGpu) << what;
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  const Tensor host = gpu.to(kCpuDevice);
  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double diff = std::abs(double{host[i]} - double{cpu[i]});
    if (!(diff <= atol + rtol * std::abs(double{cpu[i]}))) ++bad;
    worst = std::max(worst, diff);
  }
  EXPECT_EQ(bad, 0u) << what << ": largest difference " << worst;
}

void move_parameters(Layer& layer, int device) {
  for (Parameter* p : layer.parameters()) {
    p->value = p->value.to(device);
    p->grad = p->grad.to(device);
  }
}

struct LayerCase {
  std::string name;
  std::function<std::unique_ptr<Layer>()> make;
  std::vector<std::int64_t> input;
};

void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

std::vector<LayerCase> layer_cases() {
  const auto seeded = [](auto make) {
    return [make] {
      std::mt19937_64 rng(7);
      return make(rng);
    };
  };
  return {
      {"linear", seeded([](auto& rng) { return linear(37, 19, rng); }), {9, 37}},
      {"conv_lenet1", seeded([](auto& rng) { return conv2d(1, 6, 5, 1, 2, rng); }), {4, 1, 28, 28}},
      {"conv_strided", seeded([](auto& rng) { return conv2d(3, 5, 3, 2, 1, rng); }), {3, 3, 9, 11}},
      {"max_pool", [] { return max_pool2d(2, 2); }, {3, 4, 10, 10}},
      {"max_pool_overlapping", [] { return max_pool2d(3, 2); }, {2, 3, 9, 7}},
      {"relu", [] { return relu(); }, {5, 33}},
      {"flatten", [] { return flatten(); }, {4, 3, 5, 5}},
  };
}

class TrainGpuLayerTest : public TrainGpuTest, public ::testing::WithParamInterface<LayerCase> {};

TEST_P(TrainGpuLayerTest, ForwardAndBackwardMatchTheCpu) {
  const LayerCase& c = GetParam();
  auto cpu = c.make();
  auto gpu = c.make();
  move_parameters(*gpu, kGpu);
  const Tensor x = random_tensor(c.input, 11);
  const Tensor y_cpu = cpu->forward(x, true);
  const Tensor y_gpu = gpu->forward(x.to(kGpu), true);
  expect_near(y_gpu, y_cpu, c.name + " forward");
  EXPECT_EQ(gpu->activation_bytes(), cpu->activation_bytes()) << c.name;
  const Tensor r = random_tensor(y_cpu.shape(), 12);
  const Tensor dx_cpu = cpu->backward(r);
  const Tensor dx_gpu = gpu->backward(r.to(kGpu));
  expect_near(dx_gpu, dx_cpu, c.name + " input gradient");
  const auto p_cpu = cpu->parameters();
  const auto p_gpu = gpu->parameters();
  ASSERT_EQ(p_cpu.size(), p_gpu.size());
  for (std::size_t i = 0; i < p_cpu.size(); ++i) {
    expect_near(p_gpu[i]->grad, p_cpu[i]->grad, c.name + " " + p_cpu[i]->name + " gradient", 1e-4,
                1e-4);
  }
  // Evaluation mode too, which keeps nothing.
  expect_near(gpu->forward(x.to(kGpu), false), cpu->forward(x, false), c.name + " evaluation");
}

INSTANTIATE_TEST_SUITE_P(Layers, TrainGpuLayerTest, ::testing::ValuesIn(layer_cases()),
                         [](const auto& test) { return test.param.name; });

TEST_F(TrainGpuTest, TensorsCopyBetweenHostAndDevice) {
  const Tensor x = random_tensor({3, 4, 5}, 1);
  Tensor d = x.to(kGpu);
  EXPECT_TRUE(d.is_cuda());
  EXPECT_EQ(d.size(), x.size());
  EXPECT_EQ(device::pointer_device(d.data()), kGpu);
  const hoop::Tensor view = d.view();
  EXPECT_EQ(view.device, kGpu);
  EXPECT_EQ(view.data, d.data());
  Tensor copy = d;  // a deep copy on the device
  d.fill(2.5f);
  expect_near(copy, x, "copy", 0, 0);
  const Tensor back = d.reshaped({60}).to(kCpuDevice);
  for (std::size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], 2.5f);
  expect_near(Tensor({2, 2}, kGpu), Tensor({2, 2}), "zeros", 0, 0);
}

TEST_F(TrainGpuTest, DropoutMasksAreReproducibleAndScaleWhatTheyKeep) {
  auto a = dropout(0.3f, 99);
  auto b = dropout(0.3f, 99);
  const Tensor x = random_tensor({64, 100}, 3, 0.5f, 1.5f);  // no zeros of its own
  const Tensor ya = a->forward(x.to(kGpu), true).to(kCpuDevice);
  const Tensor yb = b->forward(x.to(kGpu), true).to(kCpuDevice);
  const Tensor g = random_tensor(x.shape(), 4);
  const Tensor dx = a->backward(g.to(kGpu)).to(kCpuDevice);
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(ya[i], yb[i]) << i;
    if (ya[i] == 0.0f) {
      ++dropped;
      EXPECT_EQ(dx[i], 0.0f);
    } else {
      EXPECT_FLOAT_EQ(ya[i], x[i] / 0.7f);
      EXPECT_FLOAT_EQ(dx[i], g[i] / 0.7f);
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / x.size(), 0.3, 0.03);
  // The next call draws another mask.
  const Tensor again = a->forward(x.to(kGpu), true).to(kCpuDevice);
  std::size_t same = 0;
  for (std::size_t i = 0; i < x.size(); ++i) same += (again[i] == 0.0f) == (ya[i] == 0.0f);
  EXPECT_LT(same, x.size());
}

TEST_F(TrainGpuTest, LossGradientAndAccuracyMatchTheCpu) {
  const Tensor logits = random_tensor({13, 10}, 5, -4, 4);
  std::vector<int> labels(13);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int>(i * 7 % 10);
  Tensor grad_cpu, grad_gpu;
  const float loss_cpu = softmax_cross_entropy(logits, labels, &grad_cpu);
  const Tensor on_gpu = logits.to(kGpu);
  const float loss_gpu = softmax_cross_entropy(on_gpu, labels, &grad_gpu);
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-6);
  expect_near(grad_gpu, grad_cpu, "loss gradient", 1e-7, 1e-5);
  EXPECT_EQ(count_correct(on_gpu, labels), count_correct(logits, labels));
}

// `steps` updates of one parameter with fresh random gradients on the CPU and on the GPU.
void expect_same_updates(
    const std::function<std::unique_ptr<Optimizer>(std::vector<Parameter*>)>& make,
    const std::string& what) {
  Parameter cpu{"w", random_tensor({257}, 8), Tensor({257})};
  Parameter gpu{"w", cpu.value.to(kGpu), Tensor({257}, kGpu)};
  auto opt_cpu = make({&cpu});
  auto opt_gpu = make({&gpu});
  EXPECT_EQ(opt_gpu->state_bytes(), opt_cpu->state_bytes());
  for (int step = 0; step < 5; ++step) {
    cpu.grad = random_tensor({257}, 100 + step);
    gpu.grad = cpu.grad.to(kGpu);
    opt_cpu->step();
    opt_gpu->step();
  }
  // --fmad=false: the same float operations in the same order, so the same bits.
  expect_near(gpu.value, cpu.value, what, 0, 0);
}

TEST_F(TrainGpuTest, SgdAndAdamStepLikeTheCpu) {
  expect_same_updates([](auto p) { return sgd(std::move(p), 0.1f); }, "sgd");
  expect_same_updates([](auto p) { return sgd(std::move(p), 0.1f, 0.9f, 0.01f); },
                      "sgd with momentum and weight decay");
  expect_same_updates([](auto p) { return adam(std::move(p), 0.01f, 0.9f, 0.999f, 1e-8f, 0.01f); },
                      "adam");
}

class TrainGpuModelTest : public TrainGpuTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(TrainGpuModelTest, AFewTrainingStepsEndNearTheCpuParameters) {
  Sequential cpu = make_model(GetParam(), 42);
  Sequential gpu = make_model(GetParam(), 42);
  gpu.to(kGpu);
  auto opt_cpu = sgd(cpu.parameters(), 0.05f, 0.9f);
  auto opt_gpu = sgd(gpu.parameters(), 0.05f, 0.9f);
  for (int step = 0; step < 5; ++step) {
    const Tensor x = random_tensor({16, 1, 28, 28}, 200 + step, 0, 1);
    std::vector<int> y(16);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>((i + step) % 10);
    Tensor g_cpu, g_gpu;
    const float l_cpu = softmax_cross_entropy(cpu.forward(x, true), y, &g_cpu);
    const float l_gpu = softmax_cross_entropy(gpu.forward(x.to(kGpu), true), y, &g_gpu);
    EXPECT_NEAR(l_gpu, l_cpu, 1e-4) << "step " << step;
    cpu.backward(g_cpu);
    gpu.backward(g_gpu);
    opt_cpu->step();
    opt_gpu->step();
    opt_cpu->zero_grad();
    opt_gpu->zero_grad();
  }
  const auto p_cpu = cpu.parameters();
  const auto p_gpu = gpu.parameters();
  for (std::size_t i = 0; i < p_cpu.size(); ++i) {
    expect_near(p_gpu[i]->value, p_cpu[i]->value, p_cpu[i]->name, 1e-4, 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TrainGpuModelTest, ::testing::Values("mlp", "lenet5"));

TEST_F(TrainGpuTest, MixingDevicesIsAClearError) {
  std::mt19937_64 rng(1);
  auto layer = linear(4, 3, rng);
  move_parameters(*layer, kGpu);
  try {
    layer->forward(Tensor({2, 4}), true);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                ::testing::HasSubstr("the input is on cpu, its parameters on cuda:0"));
  }
}

}  // namespace
}  // namespace hoop::train
