// The MPI transport's conformance: mpirun launches mpi_check, whose ranks run the shared
// bodies of transport_conformance.h over MPI; each case here is one body at the job size it
// needs. Skipped where mpirun is not installed.
#include <gtest/gtest.h>

#include <string>

#include "tests/transports/mpirun_harness.h"
#include "transports/mpi/mpi_transport.h"

namespace hoop::testing {
namespace {

/// Bounds a broken run (mpirun start-up included); never a speed check.
constexpr std::chrono::seconds kDeadline{90};

/// One mpirun job: the mpi_check cases matching `filter`, run one after another on `ranks`
/// ranks (each connects a fresh transport); `cases` of them must pass on every rank. Grouping
/// the two-rank bodies into one job saves an mpirun start-up per body.
struct Job {
  const char* name;
  const char* filter;
  int ranks;
  int cases;
};

class MpiTransportTest : public ::testing::TestWithParam<Job> {};

TEST_P(MpiTransportTest, PassesOnEveryRank) {
  if (mpirun_path().empty()) GTEST_SKIP() << "mpirun is not installed";
  const Job job = GetParam();
  const MpirunResult r = run_mpirun(job.ranks, HOOP_MPI_CHECK_BIN,
                                    {"--gtest_color=no", std::string("--gtest_filter=") + job.filter},
                                    {"HOOP_LOG_LEVEL=warn"}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out;
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const std::string passed = "[  PASSED  ] " + std::to_string(job.cases) +
                             (job.cases == 1 ? " test." : " tests.");
  EXPECT_EQ(count_lines_holding(r.out, passed), job.ranks) << r.out;
}

// Two ranks: every size (in one chunk and in 4 KiB chunks), length mismatch, a message long
// before its receive, test(), bad arguments, orderly shutdown, deadlines, poll(), wake() and
// mpi_usable. The sanitizer build leaves out the 4-rank job (see CMakeLists.txt).
INSTANTIATE_TEST_SUITE_P(
    Bodies, MpiTransportTest,
    ::testing::Values(Job{"TwoRankBodies",
                          "MpiRank.*:-MpiRank.AllPairs*:MpiRank.AbortCarries*", 2, 10},
                      Job{"AllPairsKeepOrder", "MpiRank.AllPairs*", 4, 1},
                      Job{"AbortCarriesTheCauseToEveryPeer", "MpiRank.AbortCarries*", 3, 1}),
    [](const auto& p) { return std::string(p.param.name); });

// A process that mpirun did not launch (this test itself) is told why it cannot use MPI.
TEST(MpiUsable, OutsideMpirunSaysWhy) {
  std::string why;
  EXPECT_FALSE(mpi::mpi_usable(&why));
  EXPECT_NE(why.find("OMPI_COMM_WORLD_SIZE"), std::string::npos) << why;
}

}  // namespace
}  // namespace hoop::testing
