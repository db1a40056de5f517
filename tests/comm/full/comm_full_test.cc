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

// A flat ring across simulated hosts whose TCP sends cannot all sit in socket buffers: a rank
// waiting for its shared-memory neighbour must keep feeding its TCP neighbour, or the ring
// deadlocks (it did, before the routed transport drove every part while waiting on one).
TEST(CommCheckHostsSmallSocketBuffers, AFlatRingAcrossHostsKeepsEveryLinkMoving) {
  const launch::testing::RunResult r = launch::testing::run_hooprun(
      {"-np", "4", HOOP_COMM_CHECK_BIN, "--hosts", "2", "check", "--algos", "ring", "--counts",
       "200003"},
      {"HOOP_TCP_BUFFER_BYTES=64K", "HOOP_TIMEOUT_SECONDS=60"}, std::chrono::seconds(300));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace hoop
