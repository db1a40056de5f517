// Collectives over the MPI transport: mpirun launches comm_check ranks with
// HOOP_TRANSPORT=mpi and no rendezvous store (the layout then comes from MPI itself); and
// HOOP_TRANSPORT=mpi outside mpirun is a clear error on every rank.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/launch/hooprun_harness.h"
#include "tests/transports/mpirun_harness.h"

namespace hoop {
namespace {

/// Bounds a broken run; never a speed check.
constexpr std::chrono::seconds kDeadline{240};

class CommCheckMpi : public ::testing::TestWithParam<int> {};

TEST_P(CommCheckMpi, EveryCollectiveMatchesTheReference) {
  if (testing::mpirun_path().empty()) GTEST_SKIP() << "mpirun is not installed";
  const int n = GetParam();
  const testing::MpirunResult r =
      testing::run_mpirun(n, HOOP_COMM_CHECK_BIN, {"check"}, {"HOOP_TRANSPORT=mpi"}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out;
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(testing::count_lines_holding(r.out, "cases"), n) << r.out;
}
INSTANTIATE_TEST_SUITE_P(Sizes, CommCheckMpi, ::testing::Values(2, 4));

TEST(CommMpi, OutsideMpirunIsAClearError) {
  const launch::testing::RunResult r = launch::testing::run_ranks(
      HOOP_COMM_CHECK_BIN, 2, {"check"}, {"HOOP_TRANSPORT=mpi"}, std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(launch::testing::count_lines_with(r.out, "FAIL create", "launched by mpirun"), 2)
      << r.out << r.err;
}

}  // namespace
}  // namespace hoop
