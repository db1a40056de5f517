// Collectives over real processes: hooprun launches comm_check ranks, which check every
// collective against locally computed references (see comm_check.cc), or play a fault.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/launch/hooprun_harness.h"

namespace hoop {
namespace {

using launch::testing::count_lines_with;
using launch::testing::run_hooprun;
using launch::testing::RunResult;

/// Bounds a broken run; never a speed check.
constexpr std::chrono::seconds kDeadline{240};

RunResult run_ranks(int n, const std::vector<std::string>& args,
                    std::chrono::seconds deadline = kDeadline) {
  return launch::testing::run_ranks(HOOP_COMM_CHECK_BIN, n, args, {}, deadline);
}

class CommCheck : public ::testing::TestWithParam<int> {};

// Every collective, algorithm, dtype and op on counts 0, 1, 7 and 1023.
TEST_P(CommCheck, EveryCollectiveMatchesTheReference) {
  const int n = GetParam();
  const RunResult r = run_ranks(n, {"check"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), n) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Sizes, CommCheck, ::testing::Values(1, 2, 3, 4, 5, 8));

// The sizes the default suite skips, on small counts.
class CommCheckOtherSizes : public CommCheck {};
TEST_P(CommCheckOtherSizes, EveryCollectiveMatchesTheReference) {
  const int n = GetParam();
  const RunResult r = run_ranks(n, {"check", "--counts", "0,1,7,1023"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), n) << r.out << r.err;
}
INSTANTIATE_TEST_SUITE_P(Sizes, CommCheckOtherSizes, ::testing::Values(6, 7));

// The same matrix with every pair over TCP (on one host auto takes shared memory).
class CommCheckTcp : public CommCheck {};
TEST_P(CommCheckTcp, EveryCollectiveMatchesTheReference) {
  const int n = GetParam();
  const RunResult r = launch::testing::run_ranks(HOOP_COMM_CHECK_BIN, n, {"check"},
                                                 {"HOOP_TRANSPORT=tcp"}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), n) << r.out << r.err;
}
INSTANTIATE_TEST_SUITE_P(Sizes, CommCheckTcp, ::testing::Values(2, 4, 8));

#ifdef HOOP_HAVE_UCX
// The same matrix with every pair over UCX: (ranks, UCX_TLS).
class CommCheckUcx : public ::testing::TestWithParam<std::pair<int, const char*>> {};
TEST_P(CommCheckUcx, EveryCollectiveMatchesTheReference) {
  const auto [n, tls] = GetParam();
  const RunResult r = launch::testing::run_ranks(
      HOOP_COMM_CHECK_BIN, n, {"check"}, {"HOOP_TRANSPORT=ucx", std::string("UCX_TLS=") + tls},
      kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), n) << r.out << r.err;
}
INSTANTIATE_TEST_SUITE_P(RanksAndTls, CommCheckUcx,
                         ::testing::Values(std::pair{2, "tcp"}, std::pair{4, "tcp"},
                                           std::pair{2, "posix"}));
#endif

// Simulated hosts (HOOP_HOST_ID per block of ranks): shared memory inside a host, TCP across,
// and the hierarchical allreduce; (ranks, hosts).
class CommCheckHosts : public ::testing::TestWithParam<std::pair<int, int>> {};
TEST_P(CommCheckHosts, EveryCollectiveMatchesTheReference) {
  const auto [n, hosts] = GetParam();
  const RunResult r = run_ranks(n, {"--hosts", std::to_string(hosts), "check"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), n) << r.out << r.err;
}
INSTANTIATE_TEST_SUITE_P(RanksAndHosts, CommCheckHosts,
                         ::testing::Values(std::pair{4, 2}, std::pair{6, 3}, std::pair{8, 2},
                                           std::pair{8, 4}, std::pair{3, 2}));

TEST(CommFault, BadArgumentsFailWithoutCommunicating) {
  const RunResult r = run_ranks(3, {"badargs"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "badargs ok"), 3) << r.out << r.err;
}

// Rank 2 SIGKILLs itself between large ring allreduces; the others are inside one and must
// fail with an error naming rank 2 (the test deadline bounds "within seconds" generously).
TEST(CommFault, KilledRankIsNamedByEveryOtherRank) {
  const RunResult r = run_ranks(4, {"kill", "2", "3"}, std::chrono::seconds(30));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "allreduce failed", "rank 2"), 3) << r.out << r.err;
  // hooprun reports the first rank to end: the killed one, or a survivor that failed first.
  EXPECT_NE(r.err.find("hooprun: rank"), std::string::npos) << r.err;
}

// Rank 1 passes a different count: a protocol error, not a hang or a corrupted buffer.
TEST(CommFault, MismatchedCountsAreAnError) {
  const RunResult r = run_ranks(3, {"mismatch"}, std::chrono::seconds(30));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_GE(count_lines_with(r.out, "mismatch result", "protocol"), 1) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "mismatch result: ok"), 0) << r.out << r.err;
}

}  // namespace
}  // namespace hoop
