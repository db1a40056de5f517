// Scalar conversions between f32 and the two 16-bit float formats hoop reduces (IEEE binary16
// "f16" and bfloat16 "bf16"), both stored as raw std::uint16_t bit patterns.
//
// Every narrowing rounds to nearest, ties to even, using integer arithmetic only, so the result
// does not depend on the floating-point environment (rounding mode, flush-to-zero) and matches
// the F16C instructions the vectorized kernels use. NaN stays NaN (quieted, sign and top payload
// bits kept), +-Inf stays +-Inf, finite values too large for the format round to +-Inf, and f16
// subnormals are produced and read exactly.
#pragma once

#include <bit>
#include <cstdint>

namespace hoop {

/// Widens an f16 bit pattern to f32; exact for every input, subnormals included.
constexpr float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
  }
  // Subnormal or zero: mantissa * 2^-24 is exact in f32 (a normal number, never flushed).
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
}

/// Narrows f32 to f16, rounding to nearest even; magnitudes >= 65520 become Inf.
constexpr std::uint16_t float_to_half(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // Inf or NaN; a NaN keeps the quiet bit so it cannot become Inf
    const std::uint32_t nan_bits =
        magnitude > 0x7f800000u ? 0x200u | ((magnitude >> 13) & 0x3ffu) : 0;
    return static_cast<std::uint16_t>(sign | 0x7c00u | nan_bits);
  }
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520
  if (magnitude >= 0x38800000u) {  // >= 2^-14: normal in f16; round at bit 13, then rebias
    const std::uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - ((127u - 15u) << 23)) >> 13));
  }
  if (magnitude < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25 rounds to 0
  // Subnormal in f16: count units of 2^-24 in the 24-bit significand, rounding the remainder.
  const std::uint32_t exponent = magnitude >> 23;  // 102..112 here
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;  // 14..24
  std::uint32_t units = significand >> shift;
  const std::uint32_t remainder = significand & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1u);
  if (remainder > halfway || (remainder == halfway && (units & 1u) != 0)) ++units;
  return static_cast<std::uint16_t>(sign | units);
}

/// Widens a bf16 bit pattern to f32; bf16 is the top half of an f32, so this is exact.
constexpr float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// Narrows f32 to bf16, rounding to nearest even; values past the largest bf16 become Inf.
constexpr std::uint16_t float_to_bf16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  // Truncating a NaN with a payload only in the low half would produce Inf; set the quiet bit.
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace hoop
