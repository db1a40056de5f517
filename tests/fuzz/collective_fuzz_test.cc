// The fuzzer's own parts (cases, exact inputs) and its short fixed-seed run over real ranks.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/reduce.h"
#include "tests/fuzz/fuzz_case.h"
#include "tests/fuzz/fuzz_data.h"
#include "tests/fuzz/fuzz_jobs.h"

namespace hoop::fuzz {
namespace {

constexpr std::uint64_t kCasesChecked = 4000;

TEST(FuzzCases, ACaseIsAFunctionOfSeedIndexAndShape) {
  const JobShape shape{3, false, std::size_t{1} << 20};
  EXPECT_EQ(describe(make_case(7, 42, shape)), describe(make_case(7, 42, shape)));
  std::set<std::string> seen;
  for (std::uint64_t i = 0; i < 50; ++i) seen.insert(describe(make_case(7, i, shape)));
  EXPECT_EQ(seen.size(), 50u);
  EXPECT_NE(describe(make_case(7, 1, shape)), describe(make_case(8, 1, shape)));
}

TEST(FuzzCases, TheSequenceReachesEveryCollectiveDtypeOpAlgorithmAndPlacement) {
  const JobShape shape{4, true, std::size_t{8} << 20};
  std::set<Collective> collectives;
  std::set<DataType> dtypes;
  std::set<ReduceOp> ops;
  std::set<Algorithm> algorithms;
  std::set<Placement> placements;
  std::set<int> offsets;
  bool zero = false, one = false, above_slice = false, zero_in_v = false;
  for (std::uint64_t i = 0; i < kCasesChecked; ++i) {
    const Case c = make_case(1, i, shape);
    collectives.insert(c.collective);
    dtypes.insert(c.dtype);
    placements.insert(c.placement);
    offsets.insert(c.input_offset);
    if (c.collective == Collective::kAllreduce) {
      ops.insert(c.op);
      algorithms.insert(c.algorithm);
      zero |= c.count == 0;
      one |= c.count == 1;
      above_slice |= c.count * dtype_size(c.dtype) > (std::size_t{512} << 10);
    }
    for (std::size_t k : c.counts) zero_in_v |= k == 0;
  }
  EXPECT_EQ(collectives.size(), std::size(kAllCollectives));
  EXPECT_EQ(dtypes.size(), std::size(kAllDataTypes));
  EXPECT_EQ(ops.size(), std::size(kAllReduceOps));
  EXPECT_EQ(algorithms.size(), 6u);  // auto and the five, hierarchical included
  EXPECT_EQ(placements.size(), 3u);
  EXPECT_EQ(offsets.size(), 16u);  // aligned, and 1 .. 15 bytes past
  EXPECT_TRUE(zero && one && above_slice && zero_in_v);
}

/// Elements of the largest buffer a rank passes in case `c`.
std::size_t largest_buffer(const Case& c, int n) {
  const auto un = static_cast<std::size_t>(n);
  std::size_t largest = c.count;
  if (c.collective == Collective::kAllgather || c.collective == Collective::kAlltoall ||
      c.collective == Collective::kReduceScatter || c.collective == Collective::kGather ||
      c.collective == Collective::kScatter)
    largest = c.count * un;
  const bool v = per_rank_counts(c.collective);
  if (v) largest = 0;
  for (std::size_t k : c.counts) largest += v ? k : 0;
  for (int r = 0; r < n && c.collective == Collective::kAlltoallv; ++r) {
    std::size_t sent = 0, received = 0;
    for (std::size_t k : send_counts(c, n, r)) sent += k;
    for (std::size_t k : recv_counts(c, n, r)) received += k;
    largest = std::max({largest, sent, received});
  }
  return largest;
}

TEST(FuzzCases, CasesFitTheirJob) {
  for (int n : {1, 2, 3, 5, 8}) {
    const JobShape shape{n, false, std::size_t{1} << 20};
    const auto un = static_cast<std::size_t>(n);
    for (std::uint64_t i = 0; i < kCasesChecked / 4; ++i) {
      const Case c = make_case(3, i, shape);
      const std::string what = describe(c);
      const std::size_t es = dtype_size(c.dtype);
      EXPECT_NE(c.algorithm, Algorithm::kHierarchical) << what;
      EXPECT_LT(c.root, n) << what;
      EXPECT_LE(largest_buffer(c, n) * es, shape.max_bytes) << what;
      if (c.collective == Collective::kAlltoallv) {
        ASSERT_EQ(c.counts.size(), un * un) << what;
        // In place: what a rank sends to each peer is what it receives from it.
        for (int r = 0; r < n && c.placement != Placement::kSeparate; ++r)
          EXPECT_EQ(send_counts(c, n, r), recv_counts(c, n, r)) << what;
      }
      if (c.collective == Collective::kAllgatherv) {
        EXPECT_EQ(c.counts.size(), un) << what;
        EXPECT_NE(c.placement, Placement::kNullInput) << what;
      }
      if (c.collective == Collective::kGatherv || c.collective == Collective::kScatterv ||
          c.collective == Collective::kReduceScatterv) {
        EXPECT_EQ(c.counts.size(), un) << what;
      }
    }
  }
}

// The inputs' promise: hoop's own kernels, combining the ranks' inputs front to back or back to
// front, reach exactly the expected bits for every dtype, op and job size.
TEST(FuzzData, EveryCombinationOrderGivesTheExpectedBits) {
  constexpr std::size_t kCount = 1000;
  for (int n : {1, 2, 3, 4, 7, 8}) {
    for (DataType dt : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        for (int scale : {-4, 0, 3}) {
          Case c;
          c.data_key = static_cast<std::uint64_t>(n * 100 + scale);
          c.dtype = dt;
          c.op = op;
          c.scale_exp = dtype_is_float(dt) && op != ReduceOp::kProd ? scale : 0;
          const ExactReduction data(c, n);
          const std::size_t bytes = kCount * dtype_size(dt);
          std::vector<std::vector<std::byte>> in(n, std::vector<std::byte>(bytes));
          for (int r = 0; r < n; ++r) data.input(r, 0, kCount, in[r].data());
          std::vector<std::byte> expected(bytes);
          data.expected(0, kCount, expected.data());
          for (bool backwards : {false, true}) {
            std::vector<std::byte> acc = in[backwards ? n - 1 : 0];
            for (int k = 1; k < n; ++k)
              ASSERT_TRUE(
                  reduce_into(acc.data(), in[backwards ? n - 1 - k : k].data(), kCount, dt, op)
                      .ok());
            if (op == ReduceOp::kAvg) {
              ASSERT_TRUE(divide(acc.data(), kCount, dt, n).ok());
            }
            ASSERT_EQ(compare(dt, acc.data(), expected.data(), kCount), "")
                << n << " ranks, " << dtype_name(dt) << " " << op_name(op) << " scale " << scale
                << (backwards ? ", backwards" : "");
          }
        }
      }
    }
  }
}

TEST(FuzzData, GuardsNoticeAWriteJustOutsideTheBuffer) {
  for (int offset : {0, 1, 15}) {
    GuardedBuffer b(10, offset, 99);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, static_cast<unsigned>(offset));
    EXPECT_EQ(b.check_guards("b"), "");
    b.data()[9] = ~b.data()[9];  // inside: fine
    EXPECT_EQ(b.check_guards("b"), "");
    b.data()[10] = ~b.data()[10];
    EXPECT_EQ(b.check_guards("b"), "b: the guard byte 0 past the end changed");
    b.data()[10] = ~b.data()[10];
    b.data()[-1] = ~b.data()[-1];
    EXPECT_EQ(b.check_guards("b"), "b: the guard byte 1 before the buffer changed");
  }
}

using testing::expect_job_passes;
using testing::FuzzJob;

class CollectiveFuzzShort : public ::testing::TestWithParam<FuzzJob> {};

// A fixed seed, so that the default suite is repeatable; buffers up to 2 MiB still cross every
// slice boundary but the hierarchical allreduce's 4 MiB segments. The long run
// (collective_fuzz_long_test) draws new seeds and goes up to 8 MiB.
TEST_P(CollectiveFuzzShort, FixedSeedCasesPass) {
  expect_job_passes(GetParam(), {"--seed", "1", "--cases", "80", "--max-kib", "2048"},
                    std::chrono::seconds(240));
}

INSTANTIATE_TEST_SUITE_P(
    Jobs, CollectiveFuzzShort,
    ::testing::Values(FuzzJob{"2Ranks_tcp", 2, 0, {"HOOP_TRANSPORT=tcp"}},
                      FuzzJob{"3Ranks_tcp", 3, 0, {"HOOP_TRANSPORT=tcp"}},
                      FuzzJob{"4Ranks_tcp", 4, 0, {"HOOP_TRANSPORT=tcp"}},
                      FuzzJob{"2Ranks_shm", 2, 0, {"HOOP_TRANSPORT=shm"}},
                      FuzzJob{"3Ranks_shm", 3, 0, {"HOOP_TRANSPORT=shm"}},
                      FuzzJob{"4Ranks_shm", 4, 0, {"HOOP_TRANSPORT=shm"}},
                      // shm inside two simulated hosts, tcp across, and the hierarchical allreduce
                      FuzzJob{"4Ranks_2Hosts", 4, 2, {}}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace hoop::fuzz
