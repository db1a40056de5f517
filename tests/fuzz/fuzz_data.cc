#include "tests/fuzz/fuzz_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "tests/comm/comm_reference.h"

namespace hoop::fuzz {
namespace {

using comm_check::combine;
using comm_check::mix;

std::int64_t exact_limit(DataType dtype) {
  switch (dtype) {
    case DataType::kU8:
      return 255;
    case DataType::kI8:
      return 127;
    case DataType::kI16:
      return 32767;
    case DataType::kI32:
      return std::numeric_limits<std::int32_t>::max();
    case DataType::kI64:
      return std::int64_t{1} << 62;
    case DataType::kF16:
      return std::int64_t{1} << 11;
    case DataType::kBF16:
      return std::int64_t{1} << 8;
    case DataType::kF32:
      return std::int64_t{1} << 24;
    case DataType::kF64:
      return std::int64_t{1} << 53;
  }
  return 0;
}

/// Uniform in [-bound, bound], or [0, bound] when `is_unsigned`.
std::int64_t within(std::uint64_t h, std::int64_t bound, bool is_unsigned) {
  const auto b = static_cast<std::uint64_t>(bound);
  if (is_unsigned) return static_cast<std::int64_t>(h % (b + 1));
  return static_cast<std::int64_t>(h % (2 * b + 1)) - bound;
}

/// Random bits as a value of the integer `dtype`.
std::int64_t integer_bits(DataType dtype, std::uint64_t h) {
  switch (dtype) {
    case DataType::kU8:
      return static_cast<std::uint8_t>(h);
    case DataType::kI8:
      return static_cast<std::int8_t>(h);
    case DataType::kI16:
      return static_cast<std::int16_t>(h);
    case DataType::kI32:
      return static_cast<std::int32_t>(h);
    default:
      return static_cast<std::int64_t>(h);
  }
}

std::string hex(const std::byte* p, std::size_t n) {
  std::string s = "0x";
  // Little-endian: the most significant byte last in memory, first in the number.
  for (std::size_t i = n; i-- > 0;) s += fmt::format("{:02x}", static_cast<unsigned>(p[i]));
  return s;
}

}  // namespace

ExactReduction::ExactReduction(const Case& c, int size)
    : dtype_(c.dtype),
      op_(c.op),
      size_(size),
      scale_exp_(c.scale_exp),
      key_(c.data_key),
      limit_(exact_limit(c.dtype)) {}

std::int64_t ExactReduction::units(int rank, std::size_t i) const {
  const std::uint64_t h = mix(mix(key_ + static_cast<std::uint64_t>(rank)) + i);
  const bool is_unsigned = dtype_ == DataType::kU8;
  const std::int64_t n = size_;
  switch (op_) {
    case ReduceOp::kSum:
      return within(h, limit_ / n, is_unsigned);
    case ReduceOp::kAvg:
      return n * within(h, limit_ / (n * n), is_unsigned);
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return dtype_is_float(dtype_) ? within(h, limit_, false) : integer_bits(dtype_, h);
    case ReduceOp::kProd: {
      const int twos = static_cast<int>(std::log2(static_cast<double>(limit_)));
      if (!dtype_is_float(dtype_) && (h >> 8) % 16 == 0) return 0;
      const std::int64_t magnitude = rank < twos && (h & 1) != 0 ? 2 : 1;
      return !is_unsigned && (h & 2) != 0 ? -magnitude : magnitude;
    }
    case ReduceOp::kAdasum:  // not element-wise: tests/collectives/adasum_test.cc
      break;
  }
  return 0;
}

void ExactReduction::encode(std::int64_t units, std::byte* out) const {
  const auto store = [out](auto v) { std::memcpy(out, &v, sizeof(v)); };
  const double value = std::ldexp(static_cast<double>(units), scale_exp_);
  switch (dtype_) {
    case DataType::kU8:
      return store(static_cast<std::uint8_t>(units));
    case DataType::kI8:
      return store(static_cast<std::int8_t>(units));
    case DataType::kI16:
      return store(static_cast<std::int16_t>(units));
    case DataType::kI32:
      return store(static_cast<std::int32_t>(units));
    case DataType::kI64:
      return store(units);
    case DataType::kF16:
      return store(float_to_half(static_cast<float>(value)));
    case DataType::kBF16:
      return store(float_to_bf16(static_cast<float>(value)));
    case DataType::kF32:
      return store(static_cast<float>(value));
    case DataType::kF64:
      return store(value);
  }
}

void ExactReduction::input(int rank, std::size_t first, std::size_t count, std::byte* out) const {
  const std::size_t es = dtype_size(dtype_);
  for (std::size_t i = 0; i < count; ++i) encode(units(rank, first + i), out + i * es);
}

void ExactReduction::expected(std::size_t first, std::size_t count, std::byte* out) const {
  const std::size_t es = dtype_size(dtype_);
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t acc = units(0, first + i);
    for (int r = 1; r < size_; ++r) acc = combine(op_, acc, units(r, first + i));
    if (op_ == ReduceOp::kAvg) acc /= size_;
    encode(acc, out + i * es);
  }
}

void fill_random(std::uint64_t key, std::uint64_t stream, std::byte* out, std::size_t bytes) {
  const std::uint64_t base = mix(key ^ mix(stream));
  for (std::size_t at = 0; at < bytes; at += 8) {
    const std::uint64_t word = mix(base + at / 8);
    std::memcpy(out + at, &word, std::min<std::size_t>(8, bytes - at));
  }
}

std::string compare(DataType dtype, const std::byte* got, const std::byte* expected,
                    std::size_t count, std::size_t first) {
  const std::size_t es = dtype_size(dtype);
  if (count == 0 || std::memcmp(got, expected, count * es) == 0) return "";
  std::size_t bad = 0;
  std::size_t first_bad = count;
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(got + i * es, expected + i * es, es) == 0) continue;
    ++bad;
    first_bad = std::min(first_bad, i);
  }
  const std::byte* g = got + first_bad * es;
  const std::byte* e = expected + first_bad * es;
  return fmt::format(
      "{} of {} elements differ, the first at element {}: got {} ({}) expected {} ({})", bad, count,
      first + first_bad, hex(g, es), comm_check::as_double(dtype, g), hex(e, es),
      comm_check::as_double(dtype, e));
}

GuardedBuffer::GuardedBuffer(std::size_t bytes, int offset, std::uint64_t key)
    : bytes_(bytes), offset_(static_cast<std::size_t>(offset)) {
  const std::size_t total = (lead() + bytes_ + kGuard + 63) / 64 * 64;
  base_.reset(static_cast<std::byte*>(std::aligned_alloc(64, total)));
  fill_random(key, 0, pattern_.data(), pattern_.size());
  std::memcpy(base_.get(), pattern_.data(), lead());
  fill_random(key, 1, data(), bytes_);
  std::memcpy(data() + bytes_, pattern_.data() + lead(), kGuard);
}

std::string GuardedBuffer::check_guards(const char* name) const {
  const std::byte* before = base_.get();
  for (std::size_t i = 0; i < lead(); ++i) {
    if (before[i] != pattern_[i])
      return fmt::format("{}: the guard byte {} before the buffer changed", name, lead() - i);
  }
  const std::byte* after = data() + bytes_;
  for (std::size_t i = 0; i < kGuard; ++i) {
    if (after[i] != pattern_[lead() + i])
      return fmt::format("{}: the guard byte {} past the end changed", name, i);
  }
  return "";
}

}  // namespace hoop::fuzz
