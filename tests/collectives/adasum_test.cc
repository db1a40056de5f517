// Adasum (ReduceOp::kAdasum): the pairwise combination (core/adasum.h), and the allreduce with
// 1-8 ranks as threads over the loopback transport, on inputs where its result is exact
// (orthogonal vectors add up, equal vectors stay as they are) and on random data, where every
// rank must hold the same bits. Plus the calls that must be refused.
#include "core/adasum.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "collectives/algorithms/comm_impl.h"
#include "core/half.h"
#include "tests/collectives/loopback_transport.h"

namespace hoop::testing {
namespace {

constexpr DataType kFloatTypes[] = {DataType::kF16, DataType::kBF16, DataType::kF32,
                                    DataType::kF64};

/// `values` in `dtype`'s bytes (each exactly representable in all four float types).
std::vector<std::byte> encode(const std::vector<double>& values, DataType dtype) {
  std::vector<std::byte> out(values.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::byte* p = out.data() + i * dtype_size(dtype);
    const auto f = static_cast<float>(values[i]);
    if (dtype == DataType::kF16) {
      const std::uint16_t h = float_to_half(f);
      std::memcpy(p, &h, 2);
    } else if (dtype == DataType::kBF16) {
      const std::uint16_t b = float_to_bf16(f);
      std::memcpy(p, &b, 2);
    } else if (dtype == DataType::kF32) {
      std::memcpy(p, &f, 4);
    } else {
      std::memcpy(p, &values[i], 8);
    }
  }
  return out;
}

/// Small multiples of 1/8: exact in every float type, products and sums included.
std::vector<double> random_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(-16, 16);
  std::vector<double> v(count);
  for (double& x : v) x = pick(rng) / 8.0;
  return v;
}

TEST(AdasumInto, OrthogonalVectorsAddUp) {
  for (DataType dtype : kFloatTypes) {
    std::vector<std::byte> a = encode({1, 0, 2, 0}, dtype);
    const std::vector<std::byte> b = encode({0, -3, 0, 0.5}, dtype);
    ASSERT_TRUE(adasum_into(a.data(), b.data(), 4, dtype).ok());
    EXPECT_EQ(a, encode({1, -3, 2, 0.5}, dtype)) << dtype_name(dtype);
  }
}

TEST(AdasumInto, ParallelVectorsAverage) {
  for (DataType dtype : kFloatTypes) {
    // adasum(a, 3a) = -a/2 + 5/6 * 3a = 2a.
    std::vector<std::byte> a = encode({1, -2, 0.5}, dtype);
    const std::vector<std::byte> b = encode({3, -6, 1.5}, dtype);
    ASSERT_TRUE(adasum_into(a.data(), b.data(), 3, dtype).ok());
    EXPECT_EQ(a, encode({2, -4, 1}, dtype)) << dtype_name(dtype);
  }
}

TEST(AdasumInto, AZeroVectorLeavesTheOther) {
  std::vector<std::byte> a = encode({0, 0, 0}, DataType::kF32);
  const std::vector<std::byte> b = encode({1, 2, 3}, DataType::kF32);
  ASSERT_TRUE(adasum_into(a.data(), b.data(), 3, DataType::kF32).ok());
  EXPECT_EQ(a, b);
}

TEST(AdasumInto, BothPartnersGetTheSameBits) {
  std::mt19937 rng(5);
  std::normal_distribution<double> gauss;
  for (DataType dtype : kFloatTypes) {
    std::vector<double> x(1031), y(1031);
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = gauss(rng);
      y[i] = gauss(rng) + 0.3 * x[i];
    }
    const std::vector<std::byte> a = encode(x, dtype), b = encode(y, dtype);
    std::vector<std::byte> ab = a, ba = b;
    ASSERT_TRUE(adasum_into(ab.data(), b.data(), x.size(), dtype).ok());
    ASSERT_TRUE(adasum_into(ba.data(), a.data(), x.size(), dtype).ok());
    EXPECT_EQ(ab, ba) << dtype_name(dtype);
  }
}

TEST(AdasumInto, RefusesIntegersAndNullBuffers) {
  std::int32_t a[2] = {1, 2}, b[2] = {3, 4};
  const Status s = adasum_into(a, b, 2, DataType::kI32);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("i32"), std::string::npos) << s.message();
  EXPECT_EQ(adasum_into(nullptr, b, 2, DataType::kF32).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(adasum_into(nullptr, nullptr, 0, DataType::kF32).ok());
}

/// An Adasum allreduce of `count` elements (input null: in place).
Status adasum(Communicator& comm, const void* input, void* output, std::size_t count,
              DataType dtype) {
  return allreduce(
      comm,
      {.input = input, .output = output, .count = count, .dtype = dtype, .op = ReduceOp::kAdasum});
}

class AdasumAllreduce : public ::testing::TestWithParam<int> {};

TEST_P(AdasumAllreduce, OrthogonalInputsAddUpOnEveryRank) {
  const int n = GetParam();
  for (DataType dtype : kFloatTypes) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{61}, std::size_t{4099}}) {
      // Rank r owns the elements i with i % n == r: every pair of inputs is orthogonal.
      auto input_of = [&](int r) {
        std::vector<double> v(count, 0.0);
        for (std::size_t i = static_cast<std::size_t>(r); i < count; i += n)
          v[i] = static_cast<double>((i % 13) + 1) * (r % 2 == 0 ? 1 : -1) / 4.0;
        return v;
      };
      std::vector<double> sum(count, 0.0);
      for (int r = 0; r < n; ++r) {
        const std::vector<double> v = input_of(r);
        for (std::size_t i = 0; i < count; ++i) sum[i] += v[i];
      }
      const std::vector<std::byte> want = encode(sum, dtype);
      std::vector<std::vector<std::byte>> got(static_cast<std::size_t>(n));
      const auto statuses = on_ranks(n, [&](Communicator& comm) {
        const std::vector<std::byte> in = encode(input_of(comm.rank()), dtype);
        auto& out = got[static_cast<std::size_t>(comm.rank())];
        out.resize(in.size());
        return adasum(comm, in.data(), out.data(), count, dtype);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(statuses[static_cast<std::size_t>(r)].ok())
            << statuses[static_cast<std::size_t>(r)].to_string();
        EXPECT_EQ(got[static_cast<std::size_t>(r)], want)
            << fmt::format("rank {} of {}, {} x {}", r, n, count, dtype_name(dtype));
      }
    }
  }
}

TEST_P(AdasumAllreduce, EqualInputsStayAndRandomInputsAgreeBitForBit) {
  const int n = GetParam();
  const std::size_t count = 1031;
  for (DataType dtype : kFloatTypes) {
    const std::vector<std::byte> same = encode(random_values(count, 3), dtype);
    std::vector<std::vector<std::byte>> equal(static_cast<std::size_t>(n)),
        mixed(static_cast<std::size_t>(n));
    const auto statuses = on_ranks(n, [&](Communicator& comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      equal[r] = same;  // in place
      HOOP_RETURN_IF_ERROR(adasum(comm, nullptr, equal[r].data(), count, dtype));
      mixed[r] = encode(random_values(count, 100 + static_cast<std::uint32_t>(r)), dtype);
      return adasum(comm, nullptr, mixed[r].data(), count, dtype);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(statuses[static_cast<std::size_t>(r)].ok())
          << statuses[static_cast<std::size_t>(r)].to_string();
      EXPECT_EQ(equal[static_cast<std::size_t>(r)], same) << fmt::format("rank {} of {}", r, n);
      EXPECT_EQ(mixed[static_cast<std::size_t>(r)], mixed[0])
          << fmt::format("rank {} of {}, {}", r, n, dtype_name(dtype));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, AdasumAllreduce, ::testing::Range(1, 9),
                         [](const auto& p) { return fmt::format("{}Ranks", p.param); });

/// OK when `s` is an invalid_argument whose message has `needle`; else an error naming `what`.
Status refused(const Status& s, std::string_view needle, std::string_view what) {
  if (s.code() == StatusCode::kInvalidArgument && s.message().find(needle) != std::string::npos)
    return Status::success();
  return internal_error(fmt::format("{}: {}", what, s.to_string()));
}

TEST(AdasumAllreduce, RefusesWhatItCannotDo) {
  const auto statuses = on_ranks(2, [](Communicator& comm) -> Status {
    std::int32_t ints[4] = {};
    float floats[8] = {};
    HOOP_RETURN_IF_ERROR(refused(allreduce(comm, {.input = ints,
                                                  .output = ints,
                                                  .count = 4,
                                                  .dtype = DataType::kI32,
                                                  .op = ReduceOp::kAdasum}),
                                 "floating-point", "integer adasum"));
    HOOP_RETURN_IF_ERROR(refused(allreduce(comm, {.input = floats,
                                                  .output = floats,
                                                  .count = 4,
                                                  .dtype = DataType::kF32,
                                                  .op = ReduceOp::kAdasum,
                                                  .algorithm = Algorithm::kRing}),
                                 "ring", "adasum over the ring"));
    return refused(reduce_scatter(comm, {.input = floats,
                                         .output = floats,
                                         .count = 4,
                                         .dtype = DataType::kF32,
                                         .op = ReduceOp::kAdasum}),
                   "adasum", "reduce_scatter with adasum");
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.to_string();
}

}  // namespace
}  // namespace hoop::testing
