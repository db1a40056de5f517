#include "bench/common/bench_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "src/core/half.h"

namespace hoop::bench {

Buffer allocate(std::size_t bytes) {
  constexpr std::size_t kAlign = 4096;
  const std::size_t rounded = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  return Buffer(static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded)));
}
namespace {

// Every input depends on the element index only through i % 9 (sum, avg, min, max) and
// i % 4, i % 5 (prod), so inputs and results repeat with this period.
constexpr std::size_t kPeriod = 180;

bool is_signed(DataType dtype) { return dtype != DataType::kU8; }

std::int64_t input_value(DataType dtype, ReduceOp op, int rank, int nranks, std::size_t i) {
  const auto r = static_cast<std::size_t>(rank);
  const std::int64_t small =
      static_cast<std::int64_t>((i * 7 + r * 13) % 9) - (is_signed(dtype) ? 4 : 0);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return small;
    case ReduceOp::kAvg:
      return small * nranks;
    case ReduceOp::kProd: {
      const std::int64_t magnitude = (i + r) % 4 == 0 ? 2 : 1;
      const bool negative = is_signed(dtype) && (i * 3 + r) % 5 == 0;
      return negative ? -magnitude : magnitude;
    }
    case ReduceOp::kAdasum:  // not element-wise: hoop-bench offers the ops of kAllReduceOps
      break;
  }
  return 0;
}

std::int64_t expected_value(DataType dtype, ReduceOp op, int nranks, std::size_t i) {
  std::int64_t acc = input_value(dtype, op, 0, nranks, i);
  for (int rank = 1; rank < nranks; ++rank) {
    const std::int64_t v = input_value(dtype, op, rank, nranks, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kAdasum:
        break;
    }
  }
  return op == ReduceOp::kAvg ? acc / nranks : acc;
}

// The bit pattern of integer `v` in `dtype`, zero-extended; `v` is exact there by check_exact.
std::uint64_t encode(DataType dtype, std::int64_t v) {
  std::uint64_t bits = 0;
  const auto store = [&bits](auto value) { std::memcpy(&bits, &value, sizeof(value)); };
  switch (dtype) {
    case DataType::kU8:
      store(static_cast<std::uint8_t>(v));
      break;
    case DataType::kI8:
      store(static_cast<std::int8_t>(v));
      break;
    case DataType::kI16:
      store(static_cast<std::int16_t>(v));
      break;
    case DataType::kI32:
      store(static_cast<std::int32_t>(v));
      break;
    case DataType::kI64:
      store(v);
      break;
    case DataType::kF16:
      store(float_to_half(static_cast<float>(v)));
      break;
    case DataType::kBF16:
      store(float_to_bf16(static_cast<float>(v)));
      break;
    case DataType::kF32:
      store(static_cast<float>(v));
      break;
    case DataType::kF64:
      store(static_cast<double>(v));
      break;
  }
  return bits;
}

// Largest integer magnitude up to which every integer is exact in `dtype`.
double exact_limit(DataType dtype) {
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
      return 0x1p62;
    case DataType::kF16:
      return 2048;  // 11 significant bits
    case DataType::kBF16:
      return 256;  // 8 significant bits
    case DataType::kF32:
      return 0x1p24;
    case DataType::kF64:
      return 0x1p53;
  }
  return 0;
}

// fill_block's value: 7 and 13 are coprime with kPeriod, so each block is a permutation of the
// range and the 180 phases differ.
std::int64_t block_value(DataType dtype, std::uint64_t block, std::size_t i) {
  const auto v = static_cast<std::int64_t>((i * 7 + block * 13) % kPeriod);
  return is_signed(dtype) ? v - static_cast<std::int64_t>(kPeriod / 2) : v;
}

// Elements of `result` that differ bit for bit from the tiled period of `value(i)`.
template <typename ValueFn>
std::int64_t count_mismatches(const void* result, std::size_t count, DataType dtype,
                              std::size_t first, ValueFn value) {
  const std::size_t width = dtype_size(dtype);
  std::array<std::uint64_t, kPeriod> period{};
  for (std::size_t i = 0; i < kPeriod; ++i) period[i] = encode(dtype, value(i));
  const auto* in = static_cast<const unsigned char*>(result);
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(in + i * width, &period[(first + i) % kPeriod], width) != 0) ++wrong;
  }
  return wrong;
}

// Fills one period of `dtype` bit patterns from `value(i)`, then tiles it over `count` elements.
template <typename ValueFn>
void tile(void* buf, std::size_t count, DataType dtype, ValueFn value) {
  const std::size_t width = dtype_size(dtype);
  std::array<std::uint64_t, kPeriod> period{};
  for (std::size_t i = 0; i < kPeriod; ++i) period[i] = encode(dtype, value(i));
  auto* out = static_cast<unsigned char*>(buf);
  for (std::size_t i = 0; i < count; ++i) std::memcpy(out + i * width, &period[i % kPeriod], width);
}

}  // namespace

Status check_exact(DataType dtype, ReduceOp op, int nranks) {
  const double n = nranks;
  const double small = is_signed(dtype) ? 4 : 8;
  double largest = small * n;  // sum, min, max: a partial sum of n inputs
  if (op == ReduceOp::kAvg) largest = small * n * n;
  if (op == ReduceOp::kProd) largest = std::ldexp(1.0, (nranks + 3) / 4);
  if (largest <= exact_limit(dtype)) return Status::success();
  return invalid_argument(fmt::format(
      "{} {} on {} ranks: partial results reach {:g}, past the {:g} up to which {} is exact",
      dtype_name(dtype), op_name(op), nranks, largest, exact_limit(dtype), dtype_name(dtype)));
}

void fill_allreduce_input(void* buf, std::size_t count, DataType dtype, ReduceOp op, int rank,
                          int nranks) {
  tile(buf, count, dtype, [&](std::size_t i) { return input_value(dtype, op, rank, nranks, i); });
}

std::int64_t count_allreduce_wrong(const void* result, std::size_t count, DataType dtype,
                                   ReduceOp op, int nranks, std::size_t first) {
  return count_mismatches(result, count, dtype, first,
                          [&](std::size_t i) { return expected_value(dtype, op, nranks, i); });
}

void fill_block(void* buf, std::size_t count, DataType dtype, std::uint64_t block) {
  tile(buf, count, dtype, [&](std::size_t i) { return block_value(dtype, block, i); });
}

std::int64_t count_block_wrong(const void* result, std::size_t count, DataType dtype,
                               std::uint64_t block) {
  return count_mismatches(result, count, dtype, 0,
                          [&](std::size_t i) { return block_value(dtype, block, i); });
}

void poison(void* buf, std::size_t count, DataType dtype) {
  // NaN for the float types, 255 for u8, the most negative value for signed integers: none of
  // them is a result check_exact admits.
  const std::size_t width = dtype_size(dtype);
  std::uint64_t bits = ~std::uint64_t{0};
  if (!dtype_is_float(dtype) && is_signed(dtype)) bits = std::uint64_t{1} << (width * 8 - 1);
  auto* out = static_cast<unsigned char*>(buf);
  for (std::size_t i = 0; i < count; ++i) std::memcpy(out + i * width, &bits, width);
}

}  // namespace hoop::bench
