#include <algorithm>
#include <cctype>
#include <string>

#include "core/half.h"
#include "hoop/core.h"

namespace hoop {

std::size_t dtype_size(DataType dtype) {
  switch (dtype) {
    case DataType::kU8:
    case DataType::kI8:
      return 1;
    case DataType::kI16:
    case DataType::kF16:
    case DataType::kBF16:
      return 2;
    case DataType::kI32:
    case DataType::kF32:
      return 4;
    case DataType::kI64:
    case DataType::kF64:
      return 8;
  }
  return 0;
}

std::string_view dtype_name(DataType dtype) {
  switch (dtype) {
    case DataType::kU8:
      return "u8";
    case DataType::kI8:
      return "i8";
    case DataType::kI16:
      return "i16";
    case DataType::kI32:
      return "i32";
    case DataType::kI64:
      return "i64";
    case DataType::kF16:
      return "f16";
    case DataType::kBF16:
      return "bf16";
    case DataType::kF32:
      return "f32";
    case DataType::kF64:
      return "f64";
  }
  return "unknown";
}

std::string_view op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kAdasum:
      return "adasum";
  }
  return "unknown";
}

bool dtype_is_float(DataType dtype) {
  return dtype == DataType::kF16 || dtype == DataType::kBF16 || dtype == DataType::kF32 ||
         dtype == DataType::kF64;
}

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}
}  // namespace

std::optional<DataType> parse_dtype(std::string_view name) {
  struct Alias {
    std::string_view name;
    DataType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"u8", DataType::kU8},         {"uint8", DataType::kU8},  {"i8", DataType::kI8},
      {"int8", DataType::kI8},       {"i16", DataType::kI16},   {"int16", DataType::kI16},
      {"i32", DataType::kI32},       {"int32", DataType::kI32}, {"int", DataType::kI32},
      {"i64", DataType::kI64},       {"int64", DataType::kI64}, {"f16", DataType::kF16},
      {"float16", DataType::kF16},   {"half", DataType::kF16},  {"bf16", DataType::kBF16},
      {"bfloat16", DataType::kBF16}, {"f32", DataType::kF32},   {"float32", DataType::kF32},
      {"float", DataType::kF32},     {"f64", DataType::kF64},   {"float64", DataType::kF64},
      {"double", DataType::kF64},
  };
  const std::string key = lower(name);
  for (const auto& a : kAliases)
    if (a.name == key) return a.dtype;
  return std::nullopt;
}

std::optional<ReduceOp> parse_op(std::string_view name) {
  const std::string key = lower(name);
  if (key == "sum") return ReduceOp::kSum;
  if (key == "avg" || key == "average" || key == "mean") return ReduceOp::kAvg;
  if (key == "min") return ReduceOp::kMin;
  if (key == "max") return ReduceOp::kMax;
  if (key == "prod" || key == "product") return ReduceOp::kProd;
  if (key == "adasum") return ReduceOp::kAdasum;
  return std::nullopt;
}

void f32_to_f16(const float* src, std::uint16_t* dst, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = float_to_half(src[i]);
}

void f16_to_f32(const std::uint16_t* src, float* dst, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = half_to_float(src[i]);
}

void f32_to_bf16(const float* src, std::uint16_t* dst, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = float_to_bf16(src[i]);
}

void bf16_to_f32(const std::uint16_t* src, float* dst, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = bf16_to_float(src[i]);
}

}  // namespace hoop
