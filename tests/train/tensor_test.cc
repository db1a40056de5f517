// Tests of hoop::train::Tensor: shapes, reshaping and the runtime view.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "device/device.h"
#include "hoop/train.h"

namespace hoop::train {
namespace {

using ::testing::HasSubstr;

TEST(TensorTest, ZeroFilledWithShape) {
  Tensor t({2, 3, 4});
  EXPECT_EQ(t.size(), 24u);
  EXPECT_EQ(t.bytes(), 24 * sizeof(float));
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_EQ(t.dim(-3), 2);
  for (std::size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i], 0.0f);
  EXPECT_EQ(t.shape_string(), "[2, 3, 4]");
}

TEST(TensorTest, NegativeDimensionThrowsNamingShape) {
  try {
    Tensor t({4, -1});
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("[4, -1]"));
  }
}

TEST(TensorTest, DimOutOfRangeThrows) {
  Tensor t({2, 3});
  EXPECT_THROW(t.dim(2), Error);
  EXPECT_THROW(t.dim(-3), Error);
}

TEST(TensorTest, FillAndReshape) {
  Tensor t({32, 1, 28, 28});
  EXPECT_EQ(t.shape_string(), "[32, 1, 28, 28]");
  t.fill(1.5f);
  t[7] = 2.0f;
  Tensor r = t.reshaped({32, 784});
  EXPECT_EQ(r.shape_string(), "[32, 784]");
  EXPECT_EQ(r[7], 2.0f);
  EXPECT_EQ(r[8], 1.5f);
  EXPECT_EQ(t.shape_string(), "[32, 1, 28, 28]");  // reshaped() copies
  t.reshape({784, 32});
  EXPECT_EQ(t.dim(0), 784);
}

TEST(TensorTest, ReshapeWithOtherCountThrowsNamingBothShapes) {
  Tensor t({2, 3});
  try {
    t.reshape({4, 2});
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[2, 3]"));
    EXPECT_THAT(e.what(), HasSubstr("[4, 2]"));
  }
  EXPECT_EQ(t.shape_string(), "[2, 3]");
}

TEST(TensorTest, ViewDescribesStorage) {
  Tensor t({5, 6});
  hoop::Tensor v = t.view();
  EXPECT_EQ(v.data, t.data());
  EXPECT_EQ(v.dtype, DataType::kF32);
  EXPECT_EQ(v.shape, t.shape());
  EXPECT_EQ(v.device, kCpuDevice);
  EXPECT_EQ(v.bytes(), t.bytes());
}

TEST(TensorTest, ParsesDeviceNames) {
  EXPECT_EQ(parse_device("cpu", 3), kCpuDevice);
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "CUDA"}) {
    try {
      parse_device(bad, 0);
      FAIL() << bad << ": no throw";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("device \"") + bad + "\""));
      EXPECT_THAT(e.what(), HasSubstr("expected cpu, cuda or cuda:N"));
    }
  }
  if (device::device_count() > 0) {
    EXPECT_EQ(parse_device("cuda", 5), 5 % device::device_count());
    EXPECT_EQ(parse_device("cuda:0", 5), 0);
    EXPECT_THROW(parse_device("cuda:" + std::to_string(device::device_count()), 0), Error);
  }
}

// What a build without CUDA, or a machine without a usable GPU, answers: the reason, never a
// crash. (With a usable device, TrainGpuTest covers CUDA tensors.)
class TensorWithoutGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device::device_count() > 0) GTEST_SKIP() << "a CUDA device is usable here";
  }
  void expect_refused(const std::function<void()>& f, const std::string& what) {
    try {
      f();
      FAIL() << "no throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr(what));
      EXPECT_THAT(e.what(), HasSubstr(device::unavailable_reason()));
    }
  }
};

TEST_F(TensorWithoutGpuTest, ACudaTensorIsRefusedWithTheReason) {
  expect_refused([] { Tensor t({2, 3}, 0); }, "cuda:0 is not usable");
  expect_refused([] { Tensor({0}, 1); }, "cuda:1 is not usable");
  expect_refused([] { (void)Tensor({4}).to(0); }, "cuda:0 is not usable");
  expect_refused([] { (void)parse_device("cuda", 0); }, "device \"cuda\": no usable CUDA device");
  expect_refused([] { (void)parse_device("cuda:0", 0); }, "no usable CUDA device");
  Sequential model = make_model("mlp", 1);
  expect_refused([&] { model.to(0); }, "cuda:0 is not usable");
}

}  // namespace
}  // namespace hoop::train
