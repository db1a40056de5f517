// Seeded inputs and local references for comm_check: every rank regenerates every other
// rank's input from (case id, rank), so it can compute the expected result on its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "hoop/core.h"

namespace hoop::comm_check {

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Element i of the input of `rank` in case `id`: random bits for integers, k/8 (k in 1..16)
/// for floats, which every float type holds exactly.
inline void gen(std::uint64_t id, int rank, DataType dt, std::size_t count, std::byte* out) {
  const std::size_t es = hoop::dtype_size(dt);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t h = mix(mix(id * 1000003 + static_cast<std::uint64_t>(rank)) + i);
    const float f = static_cast<float>(1 + h % 16) / 8.0f;
    std::byte* p = out + i * es;
    switch (dt) {
      case DataType::kF16: {
        const std::uint16_t v = hoop::float_to_half(f);
        std::memcpy(p, &v, 2);
        break;
      }
      case DataType::kBF16: {
        const std::uint16_t v = hoop::float_to_bf16(f);
        std::memcpy(p, &v, 2);
        break;
      }
      case DataType::kF32:
        std::memcpy(p, &f, 4);
        break;
      case DataType::kF64: {
        const double d = f;
        std::memcpy(p, &d, 8);
        break;
      }
      default:
        std::memcpy(p, &h, es);
        break;
    }
  }
}

inline double as_double(DataType dt, const std::byte* p) {
  switch (dt) {
    case DataType::kU8:
      return static_cast<double>(*reinterpret_cast<const std::uint8_t*>(p));
    case DataType::kI8:
      return static_cast<double>(*reinterpret_cast<const std::int8_t*>(p));
    case DataType::kI16:
      return static_cast<double>(*reinterpret_cast<const std::int16_t*>(p));
    case DataType::kI32: {
      std::int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kI64: {
      std::int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DataType::kF16: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return hoop::half_to_float(v);
    }
    case DataType::kBF16: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return hoop::bf16_to_float(v);
    }
    case DataType::kF32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kF64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
  return 0;
}

template <typename T>
void int_fold(ReduceOp op, int n, const std::vector<std::vector<std::byte>>& in, std::size_t i,
              std::byte* out) {
  using U = std::make_unsigned_t<T>;
  T acc;
  std::memcpy(&acc, in[0].data() + i * sizeof(T), sizeof(T));
  for (int r = 1; r < n; ++r) {
    T x;
    std::memcpy(&x, in[r].data() + i * sizeof(T), sizeof(T));
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc = static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(x)));
        break;
      case ReduceOp::kProd:
        acc = static_cast<T>(static_cast<U>(static_cast<U>(acc) * static_cast<U>(x)));
        break;
      case ReduceOp::kMin:
        acc = x < acc ? x : acc;
        break;
      case ReduceOp::kMax:
        acc = x > acc ? x : acc;
        break;
      case ReduceOp::kAdasum:  // not element-wise: tests/collectives/adasum_test.cc
        break;
    }
  }
  if (op == ReduceOp::kAvg) acc = static_cast<T>(acc / static_cast<T>(n));
  std::memcpy(out, &acc, sizeof(T));
}

/// One step of a reference reduction without wrap-around: acc op x (kAvg sums; the caller
/// divides once at the end).
template <typename T>
T combine(ReduceOp op, T acc, T x) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return acc + x;
    case ReduceOp::kProd:
      return acc * x;
    case ReduceOp::kMin:
      return std::min(acc, x);
    case ReduceOp::kMax:
      return std::max(acc, x);
    case ReduceOp::kAdasum:  // not element-wise: tests/collectives/adasum_test.cc
      break;
  }
  return acc;
}

/// The reduction of element i over the ranks' inputs: exact bytes for integers (wrap-around,
/// truncating avg), a float64 value for floats.
inline void reference(DataType dt, ReduceOp op, int n,
                      const std::vector<std::vector<std::byte>>& in, std::size_t i,
                      std::byte* exact, double* approx) {
  switch (dt) {
    case DataType::kU8:
      return int_fold<std::uint8_t>(op, n, in, i, exact);
    case DataType::kI8:
      return int_fold<std::int8_t>(op, n, in, i, exact);
    case DataType::kI16:
      return int_fold<std::int16_t>(op, n, in, i, exact);
    case DataType::kI32:
      return int_fold<std::int32_t>(op, n, in, i, exact);
    case DataType::kI64:
      return int_fold<std::int64_t>(op, n, in, i, exact);
    default:
      break;
  }
  const std::size_t es = hoop::dtype_size(dt);
  double acc = as_double(dt, in[0].data() + i * es);
  for (int r = 1; r < n; ++r) {
    acc = combine(op, acc, as_double(dt, in[r].data() + i * es));
  }
  if (op == ReduceOp::kAvg) acc /= n;
  *approx = acc;
}

inline double tolerance(DataType dt, int n) {
  const double eps = dt == DataType::kF16    ? 0x1p-10
                     : dt == DataType::kBF16 ? 0x1p-7
                     : dt == DataType::kF32  ? 0x1p-23
                                             : 0x1p-52;
  return eps * (n + 2) * 2;
}

}  // namespace hoop::comm_check
