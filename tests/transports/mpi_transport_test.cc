// The MPI transport's conformance: mpirun launches mpi_check, whose ranks run the shared
// bodies of transport_conformance.h over MPI; each case here is one body at the job size it
// needs. Skipped where mpirun is not installed.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "tests/transports/mpirun_harness.h"

namespace hoop::testing {
namespace {

/// Bounds a broken run (mpirun start-up included); never a speed check.
constexpr std::chrono::seconds kDeadline{90};

class MpiTransportTest : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(MpiTransportTest, PassesOnEveryRank) {
  if (mpirun_path().empty()) GTEST_SKIP() << "mpirun is not installed";
  const auto [name, n] = GetParam();
  const MpirunResult r =
      run_mpirun(n, HOOP_MPI_CHECK_BIN, {std::string("--gtest_filter=MpiRank.") + name},
                 {"HOOP_LOG_LEVEL=warn"}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out;
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(count_lines_holding(r.out, "[  PASSED  ] 1 test"), n) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Bodies, MpiTransportTest,
    ::testing::Values(std::pair{"PingPongOfEverySizeArrivesIntact", 2},
                      std::pair{"PingPongInSmallChunks", 2},
                      std::pair{"AllPairsWithManyMessagesInFlightKeepOrder", 4},
                      std::pair{"LengthMismatchFailsTheReceiveAndTheStreamGoesOn", 2},
                      std::pair{"LargeMessageSentLongBeforeItsReceive", 2},
                      std::pair{"TestPollsWithoutBlockingAndConsumes", 2},
                      std::pair{"BadArgumentsAreRefused", 2},
                      std::pair{"OrderlyShutdownThenLaterReceivesFail", 2},
                      std::pair{"WaitDeadlineNamesThePeerAndAborts", 2},
                      std::pair{"AbortCarriesTheCauseToEveryPeer", 3},
                      std::pair{"PollEndsOnWakeAndOnArrival", 2}),
    [](const auto& info) { return std::string(info.param.first); });

}  // namespace
}  // namespace hoop::testing
