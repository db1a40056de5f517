// The full matrix over real processes, including (1 << 20) + 3 element buffers (ctest label
// `full`; `nosanitize` because the large references are slow under ASan).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/launch/hooprun_harness.h"

namespace hoop {
namespace {

class CommCheckFull : public ::testing::TestWithParam<int> {};

TEST_P(CommCheckFull, EveryCollectiveMatchesTheReferenceWithLargeBuffers) {
  const int n = GetParam();
  const launch::testing::RunResult r = launch::testing::run_hooprun(
      {"-np", std::to_string(n), HOOP_COMM_CHECK_BIN, "check", "--big"}, {},
      std::chrono::seconds(300));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Sizes, CommCheckFull, ::testing::Values(2, 3, 5, 8));

// Two simulated hosts of two ranks: shared memory inside, TCP across, hierarchical allreduce.
TEST(CommCheckFullHosts, TwoHostsOfTwoRanksMatchTheReferenceWithLargeBuffers) {
  const launch::testing::RunResult r = launch::testing::run_hooprun(
      {"-np", "4", HOOP_COMM_CHECK_BIN, "--hosts", "2", "check", "--big"}, {},
      std::chrono::seconds(300));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace hoop
