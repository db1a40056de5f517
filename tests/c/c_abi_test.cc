// The C ABI over real processes: hooprun launches c_check (a C program) as every rank, over
// TCP and over shared memory, and each rank reports what it checked (see c_check_main.c).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "tests/launch/hooprun_harness.h"

namespace hoop {
namespace {

using launch::testing::count_lines_with;
using launch::testing::RunResult;

/// Bounds a broken run; never a speed check.
constexpr std::chrono::seconds kDeadline{240};
/// The fault modes must end well before it: every rank reports an error within seconds.
constexpr std::chrono::seconds kFaultDeadline{60};

RunResult run_c_check(int ranks, const std::string& transport, const std::string& mode,
                      std::chrono::seconds deadline) {
  return launch::testing::run_ranks(HOOP_C_CHECK_BIN, ranks, {mode},
                                    {"HOOP_TRANSPORT=" + transport, "HOOP_TIMEOUT_SECONDS=20"},
                                    deadline);
}

/// (mode, ranks, transport)
using Job = std::tuple<std::string, int, std::string>;
class CAbi : public ::testing::TestWithParam<Job> {};

// Each mode prints "rank R: MODE ok" on every rank that passed all its checks.
TEST_P(CAbi, EveryRankPassesItsChecks) {
  const auto& [mode, ranks, transport] = GetParam();
  const RunResult r = run_c_check(ranks, transport, mode, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, mode + " ok"), ranks) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "FAIL"), 0) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Jobs, CAbi,
    ::testing::Combine(::testing::Values("comm", "runtime", "errors", "groups", "async"),
                       ::testing::Values(2, 3), ::testing::Values("tcp", "shm")),
    [](const auto& p) {
      return std::get<0>(p.param) + "_" + std::to_string(std::get<1>(p.param)) + "Ranks_" +
             std::get<2>(p.param);
    });

class CAbiFault : public ::testing::TestWithParam<std::string> {};

// A fault job ended in time, failed, and `reporting` ranks printed an error for `what`
// ("WHAT result: <status>: <message>"), none of them a success.
void expect_errors_reported(const RunResult& r, const std::string& what, int reporting) {
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, what + " result"), reporting) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, what + " result: ok"), 0) << r.out << r.err;
}

// Rank 1 passes a different count: every rank gets an error (not a hang, not a success), and
// at least the ranks that meet rank 1's messages name its count.
TEST_P(CAbiFault, MismatchedCountsFailOnEveryRank) {
  const RunResult r = run_c_check(3, GetParam(), "mismatch", kFaultDeadline);
  expect_errors_reported(r, "mismatch", 3);
  EXPECT_GE(count_lines_with(r.out, "mismatch result", "1001"), 1) << r.out << r.err;
}

// Rank 2 exits right after joining: the others' allreduces fail, naming it.
TEST_P(CAbiFault, APeerThatExitsEarlyFailsTheOthers) {
  const RunResult r = run_c_check(3, GetParam(), "early_exit", kFaultDeadline);
  expect_errors_reported(r, "early exit", 2);
  EXPECT_EQ(count_lines_with(r.out, "early exit result", "rank 2"), 2) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Transports, CAbiFault, ::testing::Values("tcp", "shm"));

// The README's example: (1 + 2) * [1, 2, 3, 4] on both ranks, both ways.
TEST(CAbiExample, AllreduceCPrintsTheSumOnEveryRank) {
  const RunResult r = launch::testing::run_ranks(HOOP_C_EXAMPLE_BIN, 2, {}, {}, kFaultDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "communicator sum = [3, 6, 9, 12]"), 2) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "runtime sum = [3, 6, 9, 12]"), 2) << r.out << r.err;
}

}  // namespace
}  // namespace hoop
