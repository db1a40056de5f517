// Reduction kernels against a float64 / 64-bit-integer reference, for every instruction-set
// variant this CPU runs, every dtype and every op. Float references are computed in double from
// the inputs and rounded once to f32 (then to the 16-bit format): for one + or * of f32 values
// that double rounding is provably exact (53 >= 2 * 24 + 2 bits), so results compare exactly.
#include "core/reduce.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "hoop/core.h"

namespace hoop {
namespace {

using Bytes = std::vector<std::byte>;
using ::testing::HasSubstr;

constexpr ReduceIsa kAllIsas[] = {ReduceIsa::kGeneric, ReduceIsa::kAvx2};
constexpr std::size_t kLengths[] = {0,  1,  2,  3,  7,  8,   15,   16,   17,
                                    31, 33, 63, 64, 65, 127, 1023, 4097, (1u << 20) + 3};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Buffers hold elements at any byte address, so every access goes through memcpy.
template <class T>
T load_as(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void store_as(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// Integer value, sign- or zero-extended to 64 bits.
std::int64_t load_int(DataType dtype, const std::byte* p) {
  switch (dtype) {
    case DataType::kU8:
      return load_as<std::uint8_t>(p);
    case DataType::kI8:
      return load_as<std::int8_t>(p);
    case DataType::kI16:
      return load_as<std::int16_t>(p);
    case DataType::kI32:
      return load_as<std::int32_t>(p);
    default:
      return load_as<std::int64_t>(p);
  }
}

// Stores the low bits of `v`: the wrap-around the kernels promise.
void store_int(DataType dtype, std::byte* p, std::uint64_t v) {
  switch (dtype) {
    case DataType::kU8:
      return store_as(p, static_cast<std::uint8_t>(v));
    case DataType::kI8:
      return store_as(p, static_cast<std::int8_t>(v));
    case DataType::kI16:
      return store_as(p, static_cast<std::int16_t>(v));
    case DataType::kI32:
      return store_as(p, static_cast<std::int32_t>(v));
    default:
      return store_as(p, static_cast<std::int64_t>(v));
  }
}

// `v` reduced to the width of `dtype`, as the kernels store it.
std::int64_t wrap(DataType dtype, std::uint64_t v) {
  std::byte tmp[8];
  store_int(dtype, tmp, v);
  return load_int(dtype, tmp);
}

double load_float(DataType dtype, const std::byte* p) {
  switch (dtype) {
    case DataType::kF16:
      return half_to_float(load_as<std::uint16_t>(p));
    case DataType::kBF16:
      return bf16_to_float(load_as<std::uint16_t>(p));
    case DataType::kF32:
      return load_as<float>(p);
    default:
      return load_as<double>(p);
  }
}

// Rounds through f32 first for the narrower formats, as the kernels do.
void store_float(DataType dtype, std::byte* p, double v) {
  const float f = static_cast<float>(v);
  switch (dtype) {
    case DataType::kF16:
      return store_as(p, float_to_half(f));
    case DataType::kBF16:
      return store_as(p, float_to_bf16(f));
    case DataType::kF32:
      return store_as(p, f);
    default:
      return store_as(p, v);
  }
}

Bytes from_doubles(DataType dtype, const std::vector<double>& values) {
  Bytes out(values.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype_is_float(dtype)) {
      store_float(dtype, &out[i * dtype_size(dtype)], values[i]);
    } else {
      const auto v = static_cast<std::int64_t>(values[i]);
      store_int(dtype, &out[i * dtype_size(dtype)], static_cast<std::uint64_t>(v));
    }
  }
  return out;
}

double element(DataType dtype, const Bytes& buf, std::size_t i) {
  const std::byte* p = &buf[i * dtype_size(dtype)];
  return dtype_is_float(dtype) ? load_float(dtype, p) : static_cast<double>(load_int(dtype, p));
}

// Integers over their full range (so sums and products wrap); floats of both signs with
// magnitudes in [0.5, 2) scaled by 2^-3..2^3, or unscaled when `narrow` (long product chains).
Bytes random_buffer(DataType dtype, std::size_t count, std::uint64_t seed, bool narrow = false) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> magnitude(0.5, 2.0);
  std::uniform_int_distribution<int> exponent(narrow ? 0 : -3, narrow ? 0 : 3);
  Bytes out(count * dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    std::byte* p = &out[i * dtype_size(dtype)];
    if (dtype_is_float(dtype)) {
      const double sign = (rng() & 1) != 0 ? -1.0 : 1.0;
      store_float(dtype, p, sign * std::ldexp(magnitude(rng), exponent(rng)));
    } else {
      store_int(dtype, p, rng());
    }
  }
  return out;
}

double float_op(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMin:
      return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
    case ReduceOp::kMax:
      return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
    case ReduceOp::kAdasum:  // not element-wise: tests/collectives/adasum_test.cc
      break;
  }
  return kNaN;
}

std::uint64_t int_op(ReduceOp op, std::int64_t a, std::int64_t b) {
  const auto ua = static_cast<std::uint64_t>(a);
  const auto ub = static_cast<std::uint64_t>(b);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return ua + ub;
    case ReduceOp::kProd:
      return ua * ub;
    case ReduceOp::kMin:
      return static_cast<std::uint64_t>(std::min(a, b));
    case ReduceOp::kMax:
      return static_cast<std::uint64_t>(std::max(a, b));
    case ReduceOp::kAdasum:  // not element-wise: tests/collectives/adasum_test.cc
      break;
  }
  return 0;
}

// The reference for one step: op(a[i], b[i]) for every element.
Bytes expected(DataType dtype, ReduceOp op, const Bytes& a, const Bytes& b) {
  const std::size_t size = dtype_size(dtype);
  Bytes out(a.size());
  for (std::size_t off = 0; off < a.size(); off += size) {
    if (dtype_is_float(dtype)) {
      const double r = float_op(op, load_float(dtype, &a[off]), load_float(dtype, &b[off]));
      store_float(dtype, &out[off], r);
    } else {
      store_int(dtype, &out[off], int_op(op, load_int(dtype, &a[off]), load_int(dtype, &b[off])));
    }
  }
  return out;
}

// Equal element by element; floats compare as values (+0 == -0) and any NaN matches any NaN.
::testing::AssertionResult same_elements(DataType dtype, const std::byte* got,
                                         const std::byte* want, std::size_t count) {
  const std::size_t size = dtype_size(dtype);
  for (std::size_t i = 0; i < count; ++i) {
    const std::byte* g = got + i * size;
    const std::byte* w = want + i * size;
    bool same;
    if (dtype_is_float(dtype)) {
      const double gv = load_float(dtype, g);
      const double wv = load_float(dtype, w);
      same = (std::isnan(gv) && std::isnan(wv)) || gv == wv;
    } else {
      same = load_int(dtype, g) == load_int(dtype, w);
    }
    if (!same) {
      return ::testing::AssertionFailure()
             << dtype_name(dtype) << " element " << i << " of " << count << ": got "
             << (dtype_is_float(dtype) ? load_float(dtype, g) : load_int(dtype, g)) << ", want "
             << (dtype_is_float(dtype) ? load_float(dtype, w) : load_int(dtype, w));
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_elements(DataType dtype, const Bytes& got, const Bytes& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size differs";
  return same_elements(dtype, got.data(), want.data(), got.size() / dtype_size(dtype));
}

// Selects one kernel variant for the test's duration; skips where the CPU lacks it.
class IsaScope {
 public:
  explicit IsaScope(ReduceIsa isa) : previous_(reduce_isa()), ok_(set_reduce_isa(isa).ok()) {}
  ~IsaScope() { (void)set_reduce_isa(previous_); }
  bool ok() const { return ok_; }

 private:
  ReduceIsa previous_;
  bool ok_;
};

#define HOOP_USE_ISA(isa)  \
  IsaScope isa_scope(isa); \
  if (!isa_scope.ok()) GTEST_SKIP() << reduce_isa_name(isa) << " not supported on this CPU"

using Combo = std::tuple<ReduceIsa, DataType, ReduceOp>;

class ReduceTest : public ::testing::TestWithParam<Combo> {
 protected:
  ReduceIsa isa() const { return std::get<0>(GetParam()); }
  DataType dtype() const { return std::get<1>(GetParam()); }
  ReduceOp op() const { return std::get<2>(GetParam()); }
};

TEST_P(ReduceTest, ReduceIntoMatchesReference) {
  HOOP_USE_ISA(isa());
  for (const std::size_t count : kLengths) {
    SCOPED_TRACE(::testing::Message() << "count " << count);
    const Bytes a = random_buffer(dtype(), count, 1000 + count);
    const Bytes b = random_buffer(dtype(), count, 2000 + count);
    Bytes dst = a;
    ASSERT_TRUE(reduce_into(dst.data(), b.data(), count, dtype(), op()).ok());
    EXPECT_TRUE(same_elements(dtype(), dst, expected(dtype(), op(), a, b)));
  }
}

TEST_P(ReduceTest, ReduceOutOfPlaceAndInPlaceOnEitherInput) {
  HOOP_USE_ISA(isa());
  for (const std::size_t count : kLengths) {
    if (count > 4097) continue;  // the large length is covered by ReduceIntoMatchesReference
    SCOPED_TRACE(::testing::Message() << "count " << count);
    const Bytes a = random_buffer(dtype(), count, 3000 + count);
    const Bytes b = random_buffer(dtype(), count, 4000 + count);
    const Bytes want = expected(dtype(), op(), a, b);
    Bytes dst(a.size());
    Bytes a_in = a, b_in = b;
    ASSERT_TRUE(reduce(dst.data(), a_in.data(), b_in.data(), count, dtype(), op()).ok());
    EXPECT_TRUE(same_elements(dtype(), dst, want));
    EXPECT_EQ(a_in, a);
    EXPECT_EQ(b_in, b);
    ASSERT_TRUE(reduce(a_in.data(), a_in.data(), b.data(), count, dtype(), op()).ok());
    EXPECT_TRUE(same_elements(dtype(), a_in, want));
    ASSERT_TRUE(reduce(b_in.data(), a.data(), b_in.data(), count, dtype(), op()).ok());
    EXPECT_TRUE(same_elements(dtype(), b_in, want));
  }
}

TEST_P(ReduceTest, UnalignedPointersLeaveNeighbouringBytesAlone) {
  HOOP_USE_ISA(isa());
  constexpr std::size_t kCount = 67;  // whole vectors plus a tail for every variant
  constexpr std::byte kGuard{0xa5};
  const std::size_t bytes = kCount * dtype_size(dtype());
  const Bytes a = random_buffer(dtype(), kCount, 5000);
  const Bytes b = random_buffer(dtype(), kCount, 6000);
  const Bytes want = expected(dtype(), op(), a, b);
  for (std::size_t offset = 1; offset <= 7; ++offset) {
    SCOPED_TRACE(::testing::Message() << "offset " << offset);
    Bytes dst_raw(bytes + 16, kGuard), a_raw(bytes + 16), b_raw(bytes + 16);
    std::byte* dst = dst_raw.data() + offset;
    std::byte* a_at = a_raw.data() + (offset + 3) % 8;
    std::byte* b_at = b_raw.data() + (offset + 5) % 8;
    std::memcpy(a_at, a.data(), bytes);
    std::memcpy(b_at, b.data(), bytes);
    ASSERT_TRUE(reduce(dst, a_at, b_at, kCount, dtype(), op()).ok());
    EXPECT_TRUE(same_elements(dtype(), dst, want.data(), kCount));
    std::memcpy(dst, a.data(), bytes);
    ASSERT_TRUE(reduce_into(dst, b_at, kCount, dtype(), op()).ok());
    EXPECT_TRUE(same_elements(dtype(), dst, want.data(), kCount));
    for (std::size_t i = 0; i < offset; ++i) EXPECT_EQ(dst_raw[i], kGuard) << "byte " << i;
    for (std::size_t i = offset + bytes; i < dst_raw.size(); ++i) EXPECT_EQ(dst_raw[i], kGuard);
  }
}

// Eight ranks' buffers folded one after the other, as a ring or tree does, then compared with
// the float64 fold; the allowed error grows with the number of rounding steps.
TEST_P(ReduceTest, ChainOfEightRanksMatchesFloat64Reference) {
  HOOP_USE_ISA(isa());
  constexpr int kRanks = 8;
  constexpr std::size_t kCount = 4097;
  std::vector<Bytes> inputs;
  for (int r = 0; r < kRanks; ++r) {
    inputs.push_back(random_buffer(dtype(), kCount, 7000 + r, op() == ReduceOp::kProd));
  }
  Bytes acc = inputs[0];
  for (int r = 1; r < kRanks; ++r) {
    ASSERT_TRUE(reduce_into(acc.data(), inputs[r].data(), kCount, dtype(), op()).ok());
  }
  if (op() == ReduceOp::kAvg) {
    ASSERT_TRUE(divide(acc.data(), kCount, dtype(), kRanks).ok());
  }

  Bytes want(acc.size());
  const double unit_roundoff = dtype() == DataType::kF16    ? 0x1p-11
                               : dtype() == DataType::kBF16 ? 0x1p-8
                               : dtype() == DataType::kF32  ? 0x1p-24
                                                            : 0x1p-53;
  for (std::size_t i = 0; i < kCount; ++i) {
    if (!dtype_is_float(dtype())) {
      std::int64_t v = load_int(dtype(), &inputs[0][i * dtype_size(dtype())]);
      for (int r = 1; r < kRanks; ++r) {
        v = wrap(dtype(), int_op(op(), v, load_int(dtype(), &inputs[r][i * dtype_size(dtype())])));
      }
      if (op() == ReduceOp::kAvg) v /= kRanks;
      store_int(dtype(), &want[i * dtype_size(dtype())], static_cast<std::uint64_t>(v));
      continue;
    }
    double ref = element(dtype(), inputs[0], i);
    double magnitude = std::abs(ref);
    for (int r = 1; r < kRanks; ++r) {
      const double x = element(dtype(), inputs[r], i);
      ref = float_op(op(), ref, x);
      magnitude += std::abs(x);
    }
    if (op() == ReduceOp::kAvg) {
      ref /= kRanks;
      magnitude /= kRanks;
    }
    if (op() == ReduceOp::kProd) magnitude = std::abs(ref);
    const bool exact = op() == ReduceOp::kMin || op() == ReduceOp::kMax;
    const double tolerance = exact ? 0.0 : (kRanks + 1) * unit_roundoff * magnitude;
    const double got = element(dtype(), acc, i);
    ASSERT_LE(std::abs(got - ref), tolerance)
        << "element " << i << ": got " << got << ", want " << ref;
  }
  if (!dtype_is_float(dtype())) {
    EXPECT_TRUE(same_elements(dtype(), acc, want));
  }
}

std::string combo_name(const ::testing::TestParamInfo<Combo>& param_info) {
  const auto& [isa, dtype, op] = param_info.param;
  return std::string(reduce_isa_name(isa)) + "_" + std::string(dtype_name(dtype)) + "_" +
         std::string(op_name(op));
}

INSTANTIATE_TEST_SUITE_P(AllCombos, ReduceTest,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas),
                                            ::testing::ValuesIn(kAllDataTypes),
                                            ::testing::ValuesIn(kAllReduceOps)),
                         combo_name);

class ReduceIsaTest : public ::testing::TestWithParam<ReduceIsa> {};

// Checks op(x, y) and op(y, x) with the pair placed in the vector body and in the tail.
void check_special(DataType dtype, ReduceOp op, double x, double y, double want) {
  SCOPED_TRACE(::testing::Message()
               << dtype_name(dtype) << " " << op_name(op) << "(" << x << ", " << y << ")");
  constexpr std::size_t kCount = 37;
  constexpr std::size_t kSlots[] = {0, 9, 36};
  for (const bool swapped : {false, true}) {
    std::vector<double> a(kCount, 1.0), b(kCount, 1.0);
    for (const std::size_t i : kSlots) {
      a[i] = swapped ? y : x;
      b[i] = swapped ? x : y;
    }
    Bytes dst = from_doubles(dtype, a);
    ASSERT_TRUE(reduce_into(dst.data(), from_doubles(dtype, b).data(), kCount, dtype, op).ok());
    for (const std::size_t i : kSlots) {
      const double got = element(dtype, dst, i);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "slot " << i << " got " << got;
      } else {
        EXPECT_EQ(got, want) << "slot " << i;
      }
    }
  }
}

TEST_P(ReduceIsaTest, InfinitiesAndNaNsPropagate) {
  HOOP_USE_ISA(GetParam());
  for (const DataType dtype : {DataType::kF16, DataType::kBF16, DataType::kF32, DataType::kF64}) {
    check_special(dtype, ReduceOp::kSum, kInf, -kInf, kNaN);
    check_special(dtype, ReduceOp::kSum, kInf, 1.0, kInf);
    check_special(dtype, ReduceOp::kSum, kNaN, 1.0, kNaN);
    check_special(dtype, ReduceOp::kProd, 0.0, kInf, kNaN);
    check_special(dtype, ReduceOp::kProd, -2.0, kInf, -kInf);
    for (const ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      check_special(dtype, op, kNaN, 1.0, kNaN);
      check_special(dtype, op, kNaN, -kInf, kNaN);
      check_special(dtype, op, kNaN, kInf, kNaN);
    }
    check_special(dtype, ReduceOp::kMin, -kInf, 3.0, -kInf);
    check_special(dtype, ReduceOp::kMax, kInf, 3.0, kInf);
  }
  check_special(DataType::kF16, ReduceOp::kSum, 60000.0, 60000.0, kInf);
  check_special(DataType::kF16, ReduceOp::kSum, -60000.0, -60000.0, -kInf);
  check_special(DataType::kF16, ReduceOp::kProd, 0x1p-14, 0x1p-5, 0x1p-19);  // a subnormal result
  check_special(DataType::kBF16, ReduceOp::kSum, 0x1p127, 0x1p127, kInf);
}

TEST_P(ReduceIsaTest, KernelsConvertEveryHalfPatternLikeTheScalarCode) {
  HOOP_USE_ISA(GetParam());
  constexpr std::size_t kPatterns = 1u << 16;
  Bytes all(kPatterns * 2), neg_zero(kPatterns * 2);
  for (std::size_t i = 0; i < kPatterns; ++i) {
    const auto bits = static_cast<std::uint16_t>(i);
    std::memcpy(&all[i * 2], &bits, 2);
    const std::uint16_t minus_zero = 0x8000;  // the additive identity, also for -0.0
    std::memcpy(&neg_zero[i * 2], &minus_zero, 2);
  }
  for (const DataType dtype : {DataType::kF16, DataType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Bytes dst(all.size());
    ASSERT_TRUE(
        reduce(dst.data(), all.data(), neg_zero.data(), kPatterns, dtype, ReduceOp::kSum).ok());
    EXPECT_TRUE(same_elements(dtype, dst, all));
    for (const double by : {3.0, 7.0, 1000.0, 12345.0, 999983.0}) {  // rounding, subnormals
      Bytes quotient = all;
      ASSERT_TRUE(divide(quotient.data(), kPatterns, dtype, static_cast<std::int64_t>(by)).ok());
      Bytes want(all.size());
      for (std::size_t i = 0; i < kPatterns; ++i) {
        store_float(dtype, &want[i * 2],
                    static_cast<float>(element(dtype, all, i)) / static_cast<float>(by));
      }
      EXPECT_TRUE(same_elements(dtype, quotient, want)) << "divided by " << by;
    }
  }
}

TEST_P(ReduceIsaTest, DivideTruncatesIntegersAndRoundsFloats) {
  HOOP_USE_ISA(GetParam());
  for (const DataType dtype : kAllDataTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    for (const std::int64_t by : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3},
                                  std::int64_t{8}, std::int64_t{1000}, std::int64_t{1} << 40}) {
      constexpr std::size_t kCount = 1023;
      const Bytes in = random_buffer(dtype, kCount, 9000 + static_cast<std::uint64_t>(by));
      Bytes got = in, want(in.size());
      ASSERT_TRUE(divide(got.data(), kCount, dtype, by).ok());
      for (std::size_t i = 0; i < kCount; ++i) {
        std::byte* w = &want[i * dtype_size(dtype)];
        if (dtype_is_float(dtype)) {
          store_float(dtype, w, element(dtype, in, i) / static_cast<double>(by));
        } else {  // truncation toward zero, written without relying on C++'s own division rule
          const std::int64_t x = load_int(dtype, &in[i * dtype_size(dtype)]);
          const auto magnitude =
              (x < 0 ? 0 - static_cast<std::uint64_t>(x) : static_cast<std::uint64_t>(x)) /
              static_cast<std::uint64_t>(by);
          store_int(dtype, w, x < 0 ? 0 - magnitude : magnitude);
        }
      }
      EXPECT_TRUE(same_elements(dtype, got, want)) << "divided by " << by;
    }
  }
  Bytes ints = from_doubles(DataType::kI32, {-7, 7, -1, 1, -2147483648.0, 2147483647});
  ASSERT_TRUE(divide(ints.data(), 6, DataType::kI32, 2).ok());
  EXPECT_TRUE(same_elements(DataType::kI32, ints,
                            from_doubles(DataType::kI32, {-3, 3, 0, 0, -1073741824, 1073741823})));
}

std::string isa_name(const ::testing::TestParamInfo<ReduceIsa>& param_info) {
  return std::string(reduce_isa_name(param_info.param));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, ReduceIsaTest, ::testing::ValuesIn(kAllIsas), isa_name);

TEST(HalfTest, RoundTripsEveryF16Pattern) {
  for (std::uint32_t bits = 0; bits < (1u << 16); ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = half_to_float(h);
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    ASSERT_EQ(std::isnan(f), nan) << std::hex << bits;
    // A signalling NaN comes back quieted; everything else exactly.
    ASSERT_EQ(float_to_half(f), nan ? (h | 0x200) : h) << std::hex << bits;
  }
}

TEST(HalfTest, F16RoundsToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // the tie above the largest finite goes to Inf
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);             // tie, stays even
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie, rounds up to even
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // above the tie
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);                    // smallest normal
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);                    // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);                    // tie with zero, stays even
  EXPECT_EQ(float_to_half(0x1.8p-25f), 0x0001);
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002);  // 1.5 units, tie to even
  EXPECT_EQ(float_to_half(-0x1p-30f), 0x8000);     // underflow keeps the sign
  EXPECT_EQ(float_to_half(0x1.ffep-15f), 0x0400);  // tie with the largest subnormal, even
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x83ff), -0x3ffp-24f);
}

TEST(HalfTest, Bf16RoundsToNearestEvenAndKeepsNaN) {
  auto from_bits = [](std::uint32_t bits) { return std::bit_cast<float>(bits); };
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808000)), 0x3f80);  // tie, stays even
  EXPECT_EQ(float_to_bf16(from_bits(0x3f818000)), 0x3f82);  // tie, rounds up to even
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7f800001)))));  // low payload
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0xffffffff)))));
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
}

TEST(ReduceArgumentsTest, RejectsBadArgumentsWithoutTouchingMemory) {
  float x[4] = {1, 2, 3, 4};
  float y[4] = {1, 1, 1, 1};
  const auto bad_dtype = static_cast<DataType>(99);
  const auto bad_op = static_cast<ReduceOp>(99);
  auto expect_invalid = [](const Status& s, const char* mentions) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_THAT(s.message(), HasSubstr(mentions));
  };
  expect_invalid(reduce_into(nullptr, y, 4, DataType::kF32, ReduceOp::kSum), "dst");
  expect_invalid(reduce_into(x, nullptr, 4, DataType::kF32, ReduceOp::kSum), "src");
  expect_invalid(reduce(nullptr, x, y, 4, DataType::kF32, ReduceOp::kSum), "dst");
  expect_invalid(reduce(x, nullptr, y, 4, DataType::kF32, ReduceOp::kSum), "a is null");
  expect_invalid(reduce(x, x, nullptr, 4, DataType::kF32, ReduceOp::kSum), "b is null");
  expect_invalid(divide(nullptr, 4, DataType::kF32, 2), "buf");
  expect_invalid(reduce_into(x, y, 4, bad_dtype, ReduceOp::kSum), "dtype");
  expect_invalid(reduce_into(x, y, 4, DataType::kF32, bad_op), "op");
  expect_invalid(reduce(x, x, y, 0, bad_dtype, ReduceOp::kSum), "dtype");
  expect_invalid(reduce(x, x, y, 4, DataType::kF32, bad_op), "op");
  expect_invalid(divide(x, 4, bad_dtype, 2), "dtype");
  expect_invalid(divide(x, 4, DataType::kF32, 0), "divisor");
  expect_invalid(divide(x, 4, DataType::kF32, -3), "divisor");
  expect_invalid(reduce_into(x + 1, x, 3, DataType::kF32, ReduceOp::kSum), "overlap");
  expect_invalid(reduce(x, x + 1, y, 3, DataType::kF32, ReduceOp::kSum), "overlap");
  expect_invalid(reduce(x + 1, y, x, 3, DataType::kF32, ReduceOp::kSum), "overlap");
  expect_invalid(reduce_into(x, y, std::numeric_limits<std::size_t>::max() / 2, DataType::kF32,
                             ReduceOp::kSum),
                 "count");
  expect_invalid(set_reduce_isa(static_cast<ReduceIsa>(99)), "not supported");
  EXPECT_THAT(x, ::testing::ElementsAre(1, 2, 3, 4));

  // An empty reduction is fine with any pointers, null included.
  EXPECT_TRUE(reduce_into(nullptr, nullptr, 0, DataType::kF16, ReduceOp::kMax).ok());
  EXPECT_TRUE(reduce(nullptr, nullptr, nullptr, 0, DataType::kI8, ReduceOp::kProd).ok());
  EXPECT_TRUE(divide(nullptr, 0, DataType::kF64, 3).ok());
  EXPECT_TRUE(reduce_into(x, x, 4, DataType::kF32, ReduceOp::kSum).ok());  // dst == src is fine
  EXPECT_THAT(x, ::testing::ElementsAre(2, 4, 6, 8));
}

TEST(ReduceArgumentsTest, ReportsTheVariantInUse) {
  EXPECT_TRUE(reduce_isa_supported(ReduceIsa::kGeneric));
  EXPECT_TRUE(reduce_isa_supported(reduce_isa()));
  EXPECT_EQ(reduce_isa_name(ReduceIsa::kAvx2), "avx2");
}

}  // namespace
}  // namespace hoop
