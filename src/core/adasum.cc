#include "core/adasum.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "core/half.h"

// Built with -ffp-contract=off (src/core/CMakeLists.txt): a fused multiply-add would round
// a*ca + b*cb differently from b*cb + a*ca, and the two partners of an exchange evaluate it
// with the operands swapped.
namespace hoop {
namespace {

// f16 and bf16 elements, through float.
template <float (*kToFloat)(std::uint16_t), std::uint16_t (*kFromFloat)(float)>
struct Bits16 {
  static double get(const std::byte* p, std::size_t i) {
    std::uint16_t b;
    std::memcpy(&b, p + i * 2, 2);
    return kToFloat(b);
  }
  static void put(std::byte* p, std::size_t i, double v) {
    const std::uint16_t b = kFromFloat(static_cast<float>(v));
    std::memcpy(p + i * 2, &b, 2);
  }
};
using F16 = Bits16<half_to_float, float_to_half>;
using BF16 = Bits16<bf16_to_float, float_to_bf16>;

template <typename T>
struct Plain {
  static double get(const std::byte* p, std::size_t i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    return static_cast<double>(v);
  }
  static void put(std::byte* p, std::size_t i, double v) {
    const T t = static_cast<T>(v);
    std::memcpy(p + i * sizeof(T), &t, sizeof(T));
  }
};

template <typename Format>
void combine(std::byte* dst, const std::byte* src, std::size_t count) {
  double dot = 0, dst_sq = 0, src_sq = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double a = Format::get(dst, i);
    const double b = Format::get(src, i);
    dot += a * b;
    dst_sq += a * a;
    src_sq += b * b;
  }
  const double ca = dst_sq > 0 ? 1.0 - dot / (2.0 * dst_sq) : 1.0;
  const double cb = src_sq > 0 ? 1.0 - dot / (2.0 * src_sq) : 1.0;
  for (std::size_t i = 0; i < count; ++i) {
    const double a = Format::get(dst, i);
    const double b = Format::get(src, i);
    Format::put(dst, i, ca * a + cb * b);
  }
}

}  // namespace

Status adasum_into(void* dst, const void* src, std::size_t count, DataType dtype) {
  if (!dtype_is_float(dtype))
    return invalid_argument(
        fmt::format("adasum: {} is not a floating-point dtype (adasum takes f16, bf16, f32 or f64)",
                    dtype_name(dtype)));
  if (count == 0) return Status::success();
  if (dst == nullptr || src == nullptr)
    return invalid_argument(fmt::format("adasum: a null buffer with count {}", count));
  const std::size_t bytes = count * dtype_size(dtype);
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  if (d != s && d < s + bytes && s < d + bytes)
    return invalid_argument("adasum: dst partially overlaps src");
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
  switch (dtype) {
    case DataType::kF16:
      combine<F16>(out, in, count);
      break;
    case DataType::kBF16:
      combine<BF16>(out, in, count);
      break;
    case DataType::kF32:
      combine<Plain<float>>(out, in, count);
      break;
    default:
      combine<Plain<double>>(out, in, count);
      break;
  }
  return Status::success();
}

}  // namespace hoop
