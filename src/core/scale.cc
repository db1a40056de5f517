#include "core/scale.h"

#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/half.h"

namespace hoop {
namespace {

// Elements are read and written through memcpy: the buffers need no alignment (a tensor may
// lie at any byte in a packed buffer, as small inputs do in a negotiation message), and the
// copies compile to plain loads and stores.
template <typename T>
T load(const void* p, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const std::byte*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void store(void* p, std::size_t i, T v) {
  std::memcpy(static_cast<std::byte*>(p) + i * sizeof(T), &v, sizeof(T));
}

template <typename T>
void scale_as(void* dst, const void* src, std::size_t count, T factor) {
  for (std::size_t i = 0; i < count; ++i) store<T>(dst, i, load<T>(src, i) * factor);
}

template <float (*Widen)(std::uint16_t), std::uint16_t (*Narrow)(float)>
void scale_16(void* dst, const void* src, std::size_t count, float factor) {
  for (std::size_t i = 0; i < count; ++i)
    store<std::uint16_t>(dst, i, Narrow(Widen(load<std::uint16_t>(src, i)) * factor));
}

/// An integer scaled as Horovod scales one: in float64, then back, truncated toward zero and
/// held within the type's range (a plain cast of an out-of-range double is undefined).
template <typename T>
void scale_int(void* dst, const void* src, std::size_t count, double factor) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  for (std::size_t i = 0; i < count; ++i) {
    const double v = std::trunc(static_cast<double>(load<T>(src, i)) * factor);
    store<T>(dst, i,
             v <= lo   ? std::numeric_limits<T>::min()
             : v >= hi ? std::numeric_limits<T>::max()
                       : static_cast<T>(v));
  }
}

}  // namespace

Status scale_copy(void* dst, const void* src, std::size_t count, DataType dtype, double factor) {
  if (factor == 1.0) {
    if (dst != src && count > 0) std::memmove(dst, src, count * dtype_size(dtype));
    return Status::success();
  }
  switch (dtype) {
    case DataType::kF32:
      scale_as<float>(dst, src, count, static_cast<float>(factor));
      return Status::success();
    case DataType::kF64:
      scale_as<double>(dst, src, count, factor);
      return Status::success();
    case DataType::kF16:
      scale_16<half_to_float, float_to_half>(dst, src, count, static_cast<float>(factor));
      return Status::success();
    case DataType::kBF16:
      scale_16<bf16_to_float, float_to_bf16>(dst, src, count, static_cast<float>(factor));
      return Status::success();
    case DataType::kU8:
      scale_int<std::uint8_t>(dst, src, count, factor);
      return Status::success();
    case DataType::kI8:
      scale_int<std::int8_t>(dst, src, count, factor);
      return Status::success();
    case DataType::kI16:
      scale_int<std::int16_t>(dst, src, count, factor);
      return Status::success();
    case DataType::kI32:
      scale_int<std::int32_t>(dst, src, count, factor);
      return Status::success();
    case DataType::kI64:
      scale_int<std::int64_t>(dst, src, count, factor);
      return Status::success();
    default:
      return invalid_argument(
          fmt::format("scale factor {} on {} elements: no such dtype", factor, dtype_name(dtype)));
  }
}

}  // namespace hoop
