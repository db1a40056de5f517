// The first rank to fail ends the job; a program that cannot run starts nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct FailureCase {
  std::string name;
  int failing_rank;
  std::string how;       // shell that ends the failing rank
  int exit_code;         // hooprun's
  std::string reported;  // what hooprun says about the failing rank
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const FailureCase& c, std::ostream* os) { *os << c.name; }

class HooprunFailureTest : public ::testing::TestWithParam<FailureCase> {};

TEST_P(HooprunFailureTest, FirstFailingRankEndsTheJob) {
  constexpr int kRanks = 3;
  const FailureCase& c = GetParam();
  TempDir dir;
  // Every rank reports its pid; the failing one fails once the test has seen them all, the
  // others would sleep for a minute.
  std::unique_ptr<Hooprun> hooprun = Hooprun::start(
      sh_job(kRanks, sh_write_pid(dir) + "if [ $HOOP_RANK = " + std::to_string(c.failing_rank) +
                         " ]; then " + sh_wait_for_go(dir) + c.how + "; fi; exec sleep 60"));
  ASSERT_TRUE(hooprun);
  const std::vector<pid_t> pids = wait_for_rank_pids(dir, kRanks);
  write_file(dir.file("go"), "");

  const RunResult r = hooprun->wait();
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
  EXPECT_THAT(r.err, HasSubstr("hooprun: rank " + std::to_string(c.failing_rank) + " (pid " +
                               std::to_string(pids[c.failing_rank]) + ") " + c.reported));
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(wait_until_gone(pids[rank])) << "rank " << rank << " outlived the job";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Causes, HooprunFailureTest,
    ::testing::Values(
        FailureCase{"ExitCode", 1, "exit 3", 3, "exited with code 3"},
        FailureCase{"FirstRank", 0, "exit 1", 1, "exited with code 1"},
        FailureCase{"LargeCode", 2, "exit 255", 255, "exited with code 255"},
        FailureCase{"Sigkill", 1, "kill -KILL $$", 137, "was killed by signal 9 (SIGKILL)"},
        FailureCase{"Sigterm", 2, "kill -TERM $$", 143, "was killed by signal 15 (SIGTERM)"}),
    [](const ::testing::TestParamInfo<FailureCase>& p) { return p.param.name; });

TEST(HooprunFailureTest, AlsoStopsTheChildrenOfTheOtherRanks) {
  TempDir dir;
  // Rank 0's own child is in rank 0's process group and must go with it.
  std::unique_ptr<Hooprun> hooprun =
      Hooprun::start(sh_job(2, "if [ $HOOP_RANK = 0 ]; then sleep 60 & echo $! > '" + dir.path() +
                                   "/child.tmp'; mv '" + dir.path() + "/child.tmp' '" + dir.path() +
                                   "/child'; wait; else " + sh_wait_for_go(dir) + " exit 5; fi"));
  ASSERT_TRUE(hooprun);
  const std::optional<std::string> child = wait_for_line(dir.file("child"));
  ASSERT_TRUE(child.has_value());
  write_file(dir.file("go"), "");
  const RunResult r = hooprun->wait();
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_TRUE(wait_until_gone(static_cast<pid_t>(std::stol(*child))));
}

TEST(HooprunFailureTest, RanksThatIgnoreSigtermAreKilledAfterTheGracePeriod) {
  constexpr int kRanks = 2;
  TempDir dir;
  std::unique_ptr<Hooprun> hooprun = Hooprun::start(
      sh_job(kRanks, "trap '' TERM; " + sh_write_pid(dir) + "if [ $HOOP_RANK = 1 ]; then " +
                         sh_wait_for_go(dir) + " exit 4; fi; exec sleep 60"));
  ASSERT_TRUE(hooprun);
  const std::vector<pid_t> pids = wait_for_rank_pids(dir, kRanks);
  write_file(dir.file("go"), "");
  const RunResult r = hooprun->wait();
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("sending SIGKILL"));
  EXPECT_TRUE(wait_until_gone(pids[0]));
}

TEST(HooprunFailureTest, ReportsAFailureAfterTheRanksLastWords) {
  const RunResult r = run_hooprun(sh_job(1, "echo 'Traceback: boom' >&2; exit 3"));
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 3);
  const std::size_t last_words = r.err.find("[0] Traceback: boom\n");
  const std::size_t report = r.err.find("hooprun: rank 0");
  ASSERT_NE(last_words, std::string::npos) << r.err;
  ASSERT_NE(report, std::string::npos) << r.err;
  EXPECT_LT(last_words, report) << r.err;
}

TEST(HooprunFailureTest, AllRanksSucceedingIsSuccess) {
  const RunResult r = run_hooprun(sh_job(4, "exit 0"));
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());
}

struct UnrunnableCase {
  std::string name;
  std::string program;  // "{dir}" stands for a temporary directory
  int exit_code;
  std::string reason;
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const UnrunnableCase& c, std::ostream* os) { *os << c.name; }

class HooprunUnrunnableTest : public ::testing::TestWithParam<UnrunnableCase> {};

TEST_P(HooprunUnrunnableTest, ReportsTheProgramAndStartsNothing) {
  const UnrunnableCase& c = GetParam();
  TempDir dir;
  write_file(dir.file("not-executable"), "#!/bin/sh\necho started\n", 0644);
  // Passes the up-front check but execve refuses it: the failure has to come back from
  // the child through the launcher's exec-error pipe.
  write_file(dir.file("bad-format"), "echo started\n", 0755);
  std::string program = c.program;
  if (const std::size_t at = program.find("{dir}"); at != std::string::npos) {
    program.replace(at, 5, dir.path());
  }
  const RunResult r = run_hooprun({"-np", "2", program, "arg"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
  EXPECT_THAT(r.err, HasSubstr("hooprun: cannot execute '" + program + "': " + c.reason));
  EXPECT_THAT(r.out, IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(
    Programs, HooprunUnrunnableTest,
    ::testing::Values(
        UnrunnableCase{"NotOnPath", "hoop-no-such-program", 127, "No such file or directory"},
        UnrunnableCase{"MissingPath", "{dir}/missing", 127, "No such file or directory"},
        UnrunnableCase{"NotExecutable", "{dir}/not-executable", 126, "Permission denied"},
        UnrunnableCase{"Directory", "{dir}", 126, "Is a directory"},
        UnrunnableCase{"BadFormat", "{dir}/bad-format", 126, "Exec format error"}),
    [](const ::testing::TestParamInfo<UnrunnableCase>& p) { return p.param.name; });

}  // namespace
}  // namespace hoop::launch::testing
