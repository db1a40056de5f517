// Collectives over real processes: hooprun launches comm_check ranks, which check every
// collective against locally computed references (see comm_check.cc), or play a fault.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/launch/hooprun_harness.h"
#include "tests/transports/mpirun_harness.h"

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

// Every collective, algorithm, dtype and op on counts 0, 1, 7 and 1023, through real processes
// over shared memory. The algorithms themselves are checked at 1-9 ranks in-process
// (tests/collectives/inprocess_test.cc); these sizes cover the transports under collective
// traffic: a pair, an odd size and the largest power of two.
TEST_P(CommCheck, EveryCollectiveMatchesTheReference) {
  const int n = GetParam();
  const RunResult r = run_ranks(n, {"check"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), n) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Sizes, CommCheck, ::testing::Values(2, 3, 8));

// The one-host paths auto takes over shared memory at sizes CommCheck's counts do not reach: the
// slots for 100003 elements of a 1- or 2-byte type, and for a 4- or 8-byte type the single-copy
// allreduce (reading the peers' memory directly); a prime count, so that its chunks differ in
// length. (CommCheck's small counts cover the slots too.)
class CommCheckOneHost : public CommCheck {};
TEST_P(CommCheckOneHost, EveryCollectiveMatchesTheReference) {
  const int n = GetParam();
  const RunResult r =
      run_ranks(n, {"check", "--algos", "auto", "--counts", "5,100003"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), n) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Sizes, CommCheckOneHost, ::testing::Values(2, 3));

// Shared slots of 4 MiB, filled whole (named: a job that leaves them unset fills them whole only
// where it is crowded and its reads are slow): payloads from 256 KiB to 4 MiB go through the
// slots, those every rank reads whole too where this machine's reads are slow.
class CommCheckWideSlots : public CommCheck {};
TEST_P(CommCheckWideSlots, EveryCollectiveMatchesTheReference) {
  const int n = GetParam();
  const RunResult r =
      launch::testing::run_ranks(HOOP_COMM_CHECK_BIN, n,
                                 {"check", "--algos", "auto", "--counts", "100003,700001",
                                  "--dtypes", "f32,i8", "--ops", "sum,max"},
                                 {"HOOP_SHM_SLOT_BYTES=4M"}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), n) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Sizes, CommCheckWideSlots, ::testing::Values(2, 4));

// Small rooted calls in the shared slots: the ranks that only give return without waiting for
// the others (a broadcast's root, a gather's other ranks), 16 calls in a row through the small
// slots (fewer than HOOP_SHM_RUN_AHEAD's default), while the others call only once those have
// returned (comm_check eager: files in a fresh folder say so); the barrier after it confirms them
// all. With 3 ranks the broadcast's receivers read the root's slot alone.
class CommEager : public CommCheck {};
TEST_P(CommEager, GivingRanksOfSmallRootedCallsReturnBeforeTheOthersCall) {
  const int n = GetParam();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("hoop_eager_" + std::to_string(::getpid()) + "_" +
                                     std::to_string(n));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const RunResult r = run_ranks(n, {"eager", dir.string()});
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "eager ok"), n) << r.out << r.err;
}
INSTANTIATE_TEST_SUITE_P(Sizes, CommEager, ::testing::Values(2, 3));

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
INSTANTIATE_TEST_SUITE_P(Sizes, CommCheckTcp, ::testing::Values(2, 5));

// The matrix for a transport other than the default ones: every collective and algorithm on
// counts 0, 1, 7, 1023 and 16411 (a prime; 64 KiB of f32, past UCX's rendezvous threshold),
// with two dtypes and two ops in every build, and with every dtype and op in the normal build
// (EveryDtypeAndOp, up to 3 ranks: 3-5 s a job, 3x that under the sanitizers, where the
// transport's code paths are the same as with two dtypes). Larger messages (1 MiB + 3,
// 64 MiB) are the transports' conformance tests' part.
const std::vector<std::string> kTransportMatrix = {
    "check", "--counts", "0,1,7,1023,16411", "--dtypes", "f32,i8", "--ops", "sum,max"};
const std::vector<std::string> kTransportFullMatrix = {"check", "--counts", "0,1,7,1023,16411"};

void expect_every_rank_checked(int n, bool timed_out, int exit_code, const std::string& out) {
  ASSERT_FALSE(timed_out) << out;
  EXPECT_EQ(exit_code, 0) << out;
  EXPECT_EQ(count_lines_with(out, "checked", "cases"), n) << out;
}

#ifdef HOOP_HAVE_UCX
// Every pair over UCX: (ranks, UCX_TLS); the 4-rank job runs in the normal build only.
struct UcxJob {
  int ranks;
  const char* tls;
};
// How ctest lists the job (instead of its bytes).
void PrintTo(const UcxJob& job, std::ostream* os) {
  *os << job.ranks << " ranks, UCX_TLS=" << job.tls;
}
class CommCheckUcx : public ::testing::TestWithParam<UcxJob> {};
TEST_P(CommCheckUcx, EveryCollectiveMatchesTheReference) {
  const UcxJob job = GetParam();
  const RunResult r = launch::testing::run_ranks(
      HOOP_COMM_CHECK_BIN, job.ranks, kTransportMatrix,
      {"HOOP_TRANSPORT=ucx", std::string("UCX_TLS=") + job.tls}, kDeadline);
  expect_every_rank_checked(job.ranks, r.timed_out, r.exit_code, r.out + r.err);
}
TEST_P(CommCheckUcx, EveryDtypeAndOpMatchesTheReference) {
  const UcxJob job = GetParam();
  if (job.ranks > 3) GTEST_SKIP() << "4 ranks run the two-dtype matrix";
  const RunResult r = launch::testing::run_ranks(
      HOOP_COMM_CHECK_BIN, job.ranks, kTransportFullMatrix,
      {"HOOP_TRANSPORT=ucx", std::string("UCX_TLS=") + job.tls}, kDeadline);
  expect_every_rank_checked(job.ranks, r.timed_out, r.exit_code, r.out + r.err);
}
INSTANTIATE_TEST_SUITE_P(RanksAndTls, CommCheckUcx,
                         ::testing::Values(UcxJob{2, "tcp"}, UcxJob{4, "tcp"},
                                           UcxJob{3, "posix"}),
                         [](const auto& p) {
                           return std::to_string(p.param.ranks) + "Ranks_" + p.param.tls;
                         });
#endif

#ifdef HOOP_HAVE_MPI
// Every pair over MPI: mpirun launches the ranks with HOOP_TRANSPORT=mpi and no rendezvous
// store (the layout then comes from MPI itself); the 4-rank job runs in the normal build only.
class CommCheckMpi : public ::testing::TestWithParam<int> {};
TEST_P(CommCheckMpi, EveryCollectiveMatchesTheReference) {
  if (testing::mpirun_path().empty()) GTEST_SKIP() << "mpirun is not installed";
  const int n = GetParam();
  const testing::MpirunResult r = testing::run_mpirun(n, HOOP_COMM_CHECK_BIN, kTransportMatrix,
                                                      {"HOOP_TRANSPORT=mpi"}, kDeadline);
  expect_every_rank_checked(n, r.timed_out, r.exit_code, r.out);
}
TEST_P(CommCheckMpi, EveryDtypeAndOpMatchesTheReference) {
  if (testing::mpirun_path().empty()) GTEST_SKIP() << "mpirun is not installed";
  const int n = GetParam();
  if (n > 3) GTEST_SKIP() << "4 ranks run the two-dtype matrix";
  const testing::MpirunResult r = testing::run_mpirun(n, HOOP_COMM_CHECK_BIN, kTransportFullMatrix,
                                                      {"HOOP_TRANSPORT=mpi"}, kDeadline);
  expect_every_rank_checked(n, r.timed_out, r.exit_code, r.out);
}
INSTANTIATE_TEST_SUITE_P(Sizes, CommCheckMpi, ::testing::Values(2, 4),
                         [](const auto& p) { return std::to_string(p.param) + "Ranks"; });

TEST(CommMpi, OutsideMpirunIsAClearError) {
  const RunResult r = launch::testing::run_ranks(HOOP_COMM_CHECK_BIN, 2, {"check"},
                                                 {"HOOP_TRANSPORT=mpi"}, std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  // hooprun ends the job when the first rank exits, which may be before the other one prints.
  EXPECT_GE(count_lines_with(r.out, "FAIL create", "launched by mpirun"), 1) << r.out << r.err;
}
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

// The hierarchical allreduce as a pipeline of 1 KiB segments (every count above 1 KiB has
// several, the last one short), its two phases on two threads: two ranks a host over two
// hosts, and over three (a cross-host ring of several steps).
class CommCheckPipelined : public CommCheckHosts {};
TEST_P(CommCheckPipelined, HierarchicalMatchesTheReference) {
  const auto [n, hosts] = GetParam();
  const RunResult r = launch::testing::run_ranks(
      HOOP_COMM_CHECK_BIN, n, {"--hosts", std::to_string(hosts), "check", "--algos", "hierarchical"},
      {"HOOP_HIERARCHICAL_SEGMENT_BYTES=1K"}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), n) << r.out << r.err;
}
INSTANTIATE_TEST_SUITE_P(RanksAndHosts, CommCheckPipelined,
                         ::testing::Values(std::pair{4, 2}, std::pair{6, 3}));

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

// The same across two simulated hosts in the hierarchical allreduce's pipeline (64 KiB
// segments: its two threads are mid-transfer when rank 2 dies).
TEST(CommFault, KilledRankIsNamedInsideTheHierarchicalPipeline) {
  const RunResult r = launch::testing::run_ranks(
      HOOP_COMM_CHECK_BIN, 4, {"--hosts", "2", "kill", "2", "3"},
      {"HOOP_ALGO=hierarchical", "HOOP_HIERARCHICAL_SEGMENT_BYTES=64K"}, std::chrono::seconds(30));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "allreduce failed", "rank 2"), 3) << r.out << r.err;
}

// Rank 1 passes a different count: the call fingerprints name it (a mismatch error naming both
// counts), not a hang or a corrupted buffer.
TEST(CommFault, MismatchedCountsAreAnError) {
  const RunResult r = run_ranks(3, {"mismatch"}, std::chrono::seconds(30));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_GE(count_lines_with(r.out, "mismatch result", "count differs"), 1) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "mismatch result: ok"), 0) << r.out << r.err;
}

}  // namespace
}  // namespace hoop
