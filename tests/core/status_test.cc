#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "hoop/core.h"

namespace hoop {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("not positive");
  return v;
}

Status use_macros(int v, int* out) {
  HOOP_ASSIGN_OR_RETURN(int x, parse_positive(v));
  HOOP_RETURN_IF_ERROR(x > 100 ? invalid_argument("too big") : Status::success());
  *out = x;
  return Status::success();
}

TEST(Status, OkAndErrorsRenderReadably) {
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(Status().to_string(), "ok");
  Status s = timeout_error("rank 3 did not answer");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.to_string(), "timeout: rank 3 did not answer");
  EXPECT_EQ(s.with_context("allreduce grad/fc1").message(),
            "allreduce grad/fc1: rank 3 did not answer");
  EXPECT_TRUE(Status().with_context("x").ok());
  EXPECT_NE(errno_error("open /x", ENOENT).message().find("No such file"), std::string::npos);
}

TEST(Status, ResultHoldsValueOrStatus) {
  Result<int> good = parse_positive(4);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 4);
  Result<int> bad = parse_positive(-1);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THROW(bad.value(), Error);
  try {
    bad.value();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "invalid argument: not positive");
  }
  // A Result built from an ok Status would hold nothing: that is a bug, reported as such.
  Result<int> odd = Status();
  EXPECT_EQ(odd.status().code(), StatusCode::kInternal);
}

TEST(Status, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(use_macros(5, &out).ok());
  EXPECT_EQ(out, 5);
  EXPECT_EQ(use_macros(-5, &out).message(), "not positive");
  EXPECT_EQ(use_macros(500, &out).message(), "too big");
}

TEST(DataTypes, NamesSizesAndParsing) {
  for (DataType t : kAllDataTypes) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
    EXPECT_GT(dtype_size(t), 0u);
  }
  EXPECT_EQ(dtype_size(DataType::kBF16), 2u);
  EXPECT_EQ(parse_dtype("float32"), DataType::kF32);
  EXPECT_EQ(parse_dtype("BFloat16"), DataType::kBF16);
  EXPECT_EQ(parse_dtype("complex"), std::nullopt);
  for (ReduceOp op : kAllReduceOps) EXPECT_EQ(parse_op(op_name(op)), op);
  EXPECT_EQ(parse_op("average"), ReduceOp::kAvg);
  EXPECT_EQ(parse_op("xor"), std::nullopt);
  EXPECT_TRUE(dtype_is_float(DataType::kF16));
  EXPECT_FALSE(dtype_is_float(DataType::kI64));
}

TEST(DataTypes, SixteenBitConversionsRoundToNearestEven) {
  // 1 + 2^-11 lies halfway between two f16 values and rounds to the even one (1.0); 1 + 2^-8
  // likewise for bf16. 1e6 is beyond f16 (Inf) but not bf16.
  const std::vector<float> in = {0.0f, -2.5f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f, 1e6f, 0x1p-24f};
  std::vector<std::uint16_t> half(in.size()), bf16(in.size());
  f32_to_f16(in.data(), half.data(), in.size());
  f32_to_bf16(in.data(), bf16.data(), in.size());
  EXPECT_EQ(half, (std::vector<std::uint16_t>{0x0000, 0xc100, 0x3c00, 0x3c04, 0x7c00, 0x0001}));
  EXPECT_EQ(bf16, (std::vector<std::uint16_t>{0x0000, 0xc020, 0x3f80, 0x3f80, 0x4974, 0x3380}));
  std::vector<float> back(in.size());
  f16_to_f32(half.data(), back.data(), half.size());
  EXPECT_EQ(back, (std::vector<float>{0.0f, -2.5f, 1.0f, 1.0f + 0x1p-8f, INFINITY, 0x1p-24f}));
  bf16_to_f32(bf16.data(), back.data(), bf16.size());
  EXPECT_EQ(back, (std::vector<float>{0.0f, -2.5f, 1.0f, 1.0f, 999424.0f, 0x1p-24f}));
  f32_to_f16(nullptr, nullptr, 0);  // an empty range touches nothing
}

}  // namespace
}  // namespace hoop
