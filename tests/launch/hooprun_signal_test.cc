// Ctrl-C and friends: a signal to hooprun reaches every rank, and nothing outlives the job.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>

#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::HasSubstr;

std::string abbrev(int signo) { return std::string("SIG") + ::sigabbrev_np(signo); }

class HooprunSignalTest : public ::testing::TestWithParam<int> {};

TEST_P(HooprunSignalTest, IsForwardedToEveryRank) {
  constexpr int kRanks = 3;
  const int signo = GetParam();
  TempDir dir;
  std::unique_ptr<Hooprun> hooprun =
      Hooprun::start(sh_job(kRanks, sh_write_pid(dir) + "exec sleep 60"));
  ASSERT_TRUE(hooprun);
  const std::vector<pid_t> pids = wait_for_rank_pids(dir, kRanks);
  ASSERT_EQ(::kill(hooprun->pid(), signo), 0);

  const RunResult r = hooprun->wait();
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 128 + signo) << r.err;
  EXPECT_THAT(r.err, HasSubstr("hooprun: received " + abbrev(signo) + ", stopping 3 ranks"));
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(wait_until_gone(pids[rank])) << "rank " << rank << " outlived the job";
  }
}

INSTANTIATE_TEST_SUITE_P(Signals, HooprunSignalTest, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const ::testing::TestParamInfo<int>& p) { return abbrev(p.param); });

// Ranks that ignore the forwarded signal: the first Ctrl-C alone would end them only after
// the grace period, a second one kills them at once.
std::unique_ptr<Hooprun> start_job_ignoring_signals(const TempDir& dir, int num_ranks,
                                                    std::vector<pid_t>* pids) {
  std::unique_ptr<Hooprun> hooprun =
      Hooprun::start(sh_job(num_ranks, "trap '' INT TERM; " + sh_write_pid(dir) + "exec sleep 60"));
  if (hooprun) *pids = wait_for_rank_pids(dir, num_ranks);
  return hooprun;
}

TEST(HooprunSignalTest, SecondInterruptKillsAtOnce) {
  TempDir dir;
  std::vector<pid_t> pids;
  std::unique_ptr<Hooprun> hooprun = start_job_ignoring_signals(dir, 2, &pids);
  ASSERT_TRUE(hooprun);
  ASSERT_EQ(::kill(hooprun->pid(), SIGINT), 0);
  // Standard signals do not queue: send the second only once the first has been handled.
  ASSERT_TRUE(hooprun->wait_for_output([](const std::string&, const std::string& err) {
    return err.find("received SIGINT, stopping") != std::string::npos;
  }));
  ASSERT_EQ(::kill(hooprun->pid(), SIGINT), 0);

  const RunResult r = hooprun->wait();
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_THAT(r.err, HasSubstr("received SIGINT while stopping, killing 2 ranks"));
  for (pid_t pid : pids) EXPECT_TRUE(wait_until_gone(pid));
}

TEST(HooprunSignalTest, RanksIgnoringTheSignalAreKilledAfterTheGracePeriod) {
  TempDir dir;
  std::vector<pid_t> pids;
  std::unique_ptr<Hooprun> hooprun = start_job_ignoring_signals(dir, 2, &pids);
  ASSERT_TRUE(hooprun);
  ASSERT_EQ(::kill(hooprun->pid(), SIGTERM), 0);
  const RunResult r = hooprun->wait();
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_THAT(r.err, HasSubstr("2 ranks still running after 5 s, sending SIGKILL"));
  for (pid_t pid : pids) EXPECT_TRUE(wait_until_gone(pid));
}

TEST(HooprunSignalTest, RanksDieWithAKilledLauncher) {
  TempDir dir;
  std::unique_ptr<Hooprun> hooprun = Hooprun::start(sh_job(2, sh_write_pid(dir) + "exec sleep 60"));
  ASSERT_TRUE(hooprun);
  const std::vector<pid_t> pids = wait_for_rank_pids(dir, 2);
  ASSERT_EQ(::kill(hooprun->pid(), SIGKILL), 0);
  const RunResult r = hooprun->wait();
  EXPECT_EQ(r.exit_code, 137);
  for (pid_t pid : pids) EXPECT_TRUE(wait_until_gone(pid)) << "rank outlived hooprun";
}

TEST(HooprunSignalTest, ClosedStdoutEndsRanksThatKeepWriting) {
  // `hooprun ... | head -1`: once nobody reads hooprun's stdout, a rank that keeps writing
  // gets SIGPIPE as if it wrote to the closed pipe itself, instead of running on unheard.
  std::unique_ptr<Hooprun> hooprun = Hooprun::start(sh_job(1, "while :; do echo spam; done"));
  ASSERT_TRUE(hooprun);
  ASSERT_TRUE(hooprun->wait_for_output(
      [](const std::string& out, const std::string&) { return !out.empty(); }));
  hooprun->close_stdout();
  const RunResult r = hooprun->wait();
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 128 + SIGPIPE) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 0"));
  EXPECT_THAT(r.err, HasSubstr("(SIGPIPE)"));
}

}  // namespace
}  // namespace hoop::launch::testing
