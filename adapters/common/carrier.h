// How a framework's tensor dtypes travel through hoop, shared by the adapters whose frameworks
// have dtypes hoop lacks (hoop.jax, hoop.tensorflow). Such a dtype travels as a hoop type of
// the same width: unsigned integers as the signed ones (sum and product are the same bits in
// two's complement), complex numbers as pairs of floats (sum and average act on each part),
// booleans as bytes (min and max are and / or). An op that would compute something else on
// those bits is refused, naming the dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hoop/core.h"

namespace hoop::adapters {

/// A framework's dtype, as far as carrying it goes.
enum class Foreign {
  kI8, kI16, kI32, kI64, kU8, kF16, kBF16, kF32, kF64,  // hoop's own types
  kBool, kU16, kU32, kU64, kC64, kC128,                 // carried as another type
  kOther,                                               // not carried
};

/// A collective that moves bytes without reducing them (no op).
inline constexpr std::int64_t kNoOp = -1;

/// How a tensor's elements travel: as `dtype`, with a trailing dimension `pair` (2 for complex
/// numbers, else 1).
struct Carrier {
  DataType dtype = DataType::kU8;
  std::int64_t pair = 1;
};

/// The framework's name of a carried dtype.
inline std::string_view foreign_name(Foreign t) {
  switch (t) {
    case Foreign::kBool: return "bool";
    case Foreign::kU16: return "uint16";
    case Foreign::kU32: return "uint32";
    case Foreign::kU64: return "uint64";
    case Foreign::kC64: return "complex64";
    case Foreign::kC128: return "complex128";
    default: return "this dtype";
  }
}

/// The carrier of `t` for reduction `op` (a hoop::ReduceOp value, or kNoOp), or nothing with
/// `*why` saying why, prefixed with `adapter` ("hoop.jax").
inline std::optional<Carrier> carrier_of(Foreign t, std::int64_t op, std::string_view adapter,
                                         std::string* why) {
  using D = DataType;
  const bool moves_only = op == kNoOp;
  const auto r = static_cast<ReduceOp>(op);
  const bool sum_like = r == ReduceOp::kSum || r == ReduceOp::kProd;
  switch (t) {
    case Foreign::kI8: return Carrier{D::kI8};
    case Foreign::kI16: return Carrier{D::kI16};
    case Foreign::kI32: return Carrier{D::kI32};
    case Foreign::kI64: return Carrier{D::kI64};
    case Foreign::kU8: return Carrier{D::kU8};
    case Foreign::kF16: return Carrier{D::kF16};
    case Foreign::kBF16: return Carrier{D::kBF16};
    case Foreign::kF32: return Carrier{D::kF32};
    case Foreign::kF64: return Carrier{D::kF64};
    case Foreign::kBool:
      if (moves_only || r == ReduceOp::kMin || r == ReduceOp::kMax) return Carrier{D::kU8};
      break;
    case Foreign::kU16:
      if (moves_only || sum_like) return Carrier{D::kI16};
      break;
    case Foreign::kU32:
      if (moves_only || sum_like) return Carrier{D::kI32};
      break;
    case Foreign::kU64:
      if (moves_only || sum_like) return Carrier{D::kI64};
      break;
    case Foreign::kC64:
      if (moves_only || r == ReduceOp::kSum || r == ReduceOp::kAvg) return Carrier{D::kF32, 2};
      break;
    case Foreign::kC128:
      if (moves_only || r == ReduceOp::kSum || r == ReduceOp::kAvg) return Carrier{D::kF64, 2};
      break;
    case Foreign::kOther:
      *why = std::string(adapter) + ": unsupported dtype";
      return std::nullopt;
  }
  *why = std::string(adapter) + ": " + std::string(foreign_name(t)) +
         " cannot be reduced with op " + std::string(op_name(r)) +
         " (bool takes min and max; unsigned integers sum and product; complex numbers sum "
         "and average)";
  return std::nullopt;
}

}  // namespace hoop::adapters
