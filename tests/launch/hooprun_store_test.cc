// The ranks find and join the rendezvous store hooprun hosts with nothing but the
// environment hooprun gave them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::UnorderedElementsAre;

TEST(HooprunStoreTest, RanksJoinTheStoreWithTheJobSecret) {
  const RunResult r = run_hooprun({"-np", "4", "--start-timeout", "30", HOOP_STORE_RANK_BIN});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(split_lines(r.out),
              UnorderedElementsAre("[0] rank 0 saw all 4 ranks", "[1] rank 1 saw all 4 ranks",
                                   "[2] rank 2 saw all 4 ranks", "[3] rank 3 saw all 4 ranks"));
}

TEST(HooprunStoreTest, ARankWithoutTheSecretIsRefused) {
  // The rank drops the secret hooprun gave it and makes one up: the store must refuse it, and
  // its failure ends the job.
  const RunResult r = run_hooprun(
      {"-np", "1", "/bin/sh", "-c", "HOOP_SECRET=guess exec " HOOP_STORE_RANK_BIN});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("rank 0"));
}

}  // namespace
}  // namespace hoop::launch::testing
