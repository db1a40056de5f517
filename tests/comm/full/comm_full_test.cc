// The full matrix over real processes, including (1 << 20) + 3 element buffers (ctest label
// `full`; `nosanitize` because the large references are slow under ASan).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/launch/hooprun_harness.h"

namespace hoop {
namespace {

// Two ranks over shared memory; more ranks and every algorithm with large buffers run in
// process (tests/collectives, LargeBuffersInProcess), where they cost a fraction of this.
TEST(CommCheckFull, EveryCollectiveMatchesTheReferenceWithLargeBuffers) {
  const launch::testing::RunResult r = launch::testing::run_hooprun(
      {"-np", "2", HOOP_COMM_CHECK_BIN, "check", "--big"}, {}, std::chrono::seconds(300));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

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
// Two dtypes and ops are enough for that: the sizes, not the reductions, are what matter.
TEST(CommCheckHostsSmallSocketBuffers, AFlatRingAcrossHostsKeepsEveryLinkMoving) {
  const launch::testing::RunResult r = launch::testing::run_hooprun(
      {"-np", "4", HOOP_COMM_CHECK_BIN, "--hosts", "2", "check", "--algos", "ring", "--counts",
       "200003", "--dtypes", "f32,f64", "--ops", "sum,max"},
      {"HOOP_TCP_BUFFER_BYTES=64K", "HOOP_TIMEOUT_SECONDS=60"}, std::chrono::seconds(300));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace hoop
