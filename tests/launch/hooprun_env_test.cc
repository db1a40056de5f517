// The environment contract: what each rank finds in its HOOP_* variables, and that the job
// secret travels only there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// rank -> (variable -> value), from lines "[r] NAME=value".
std::map<int, std::map<std::string, std::string>> parse_env_dump(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> env;
  for (const std::string& line : split_lines(out)) {
    const std::size_t close = line.find("] ");
    const std::size_t eq = line.find('=');
    if (line.empty() || line[0] != '[' || close == std::string::npos || eq == std::string::npos) {
      ADD_FAILURE() << "unexpected line: " << line;
      continue;
    }
    env[std::stoi(line.substr(1, close - 1))][line.substr(close + 2, eq - close - 2)] =
        line.substr(eq + 1);
  }
  return env;
}

constexpr char kDumpEnv[] = "env | grep -E '^(HOOP_|HOROVOD_|MY_VAR=)'";

TEST(HooprunEnvTest, EachRankGetsItsPlaceInTheJob) {
  constexpr int kRanks = 3;
  // Stale values from an enclosing job must not leak into this one.
  const RunResult r = run_hooprun(sh_job(kRanks, kDumpEnv, {"--start-timeout", "12.5"}),
                                  {"MY_VAR=kept", "HOOP_RANK=7", "HOROVOD_RANK=9"});
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto env = parse_env_dump(r.out);
  ASSERT_EQ(env.size(), static_cast<std::size_t>(kRanks)) << r.out;
  const auto& first = env.at(0);
  for (int rank = 0; rank < kRanks; ++rank) {
    const auto& vars = env.at(rank);
    EXPECT_EQ(vars.at("HOOP_RANK"), std::to_string(rank));
    EXPECT_EQ(vars.at("HOOP_SIZE"), std::to_string(kRanks));
    EXPECT_EQ(vars.at("HOOP_LOCAL_RANK"), std::to_string(rank));
    EXPECT_EQ(vars.at("HOOP_LOCAL_SIZE"), std::to_string(kRanks));
    EXPECT_EQ(vars.at("HOOP_CROSS_RANK"), "0");
    EXPECT_EQ(vars.at("HOOP_CROSS_SIZE"), "1");
    EXPECT_EQ(vars.at("HOOP_RENDEZVOUS_ADDR"), "127.0.0.1");
    EXPECT_EQ(vars.at("HOOP_START_TIMEOUT"), "12.5");
    EXPECT_EQ(vars.at("MY_VAR"), "kept");
    // horovodrun's names carry this job's layout, not the stale value.
    EXPECT_EQ(vars.at("HOROVOD_RANK"), std::to_string(rank));
    EXPECT_EQ(vars.at("HOROVOD_SIZE"), std::to_string(kRanks));
    EXPECT_EQ(vars.at("HOROVOD_LOCAL_RANK"), std::to_string(rank));
    const int port = std::stoi(vars.at("HOOP_RENDEZVOUS_PORT"));
    EXPECT_GT(port, 0);
    EXPECT_LT(port, 65536);
    const std::string& secret = vars.at("HOOP_SECRET");
    EXPECT_EQ(secret.size(), 64u);
    EXPECT_EQ(secret.find_first_not_of("0123456789abcdef"), std::string::npos) << secret;
    EXPECT_FALSE(vars.at("HOOP_JOB_ID").empty());
    // One job: one store, one secret, one id.
    for (const char* shared : {"HOOP_RENDEZVOUS_PORT", "HOOP_SECRET", "HOOP_JOB_ID"}) {
      EXPECT_EQ(vars.at(shared), first.at(shared)) << shared;
    }
  }
}

TEST(HooprunEnvTest, EveryJobGetsAFreshSecret) {
  const auto secret_of_one_job = [] {
    const RunResult r = run_hooprun(sh_job(1, "echo $HOOP_SECRET"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_NE(secret_of_one_job(), secret_of_one_job());
}

struct StartTimeoutCase {
  std::vector<std::string> options;
  std::vector<std::string> env;
  std::string expected;
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const StartTimeoutCase& c, std::ostream* os) { *os << c.expected; }

class HooprunStartTimeoutTest : public ::testing::TestWithParam<StartTimeoutCase> {};

TEST_P(HooprunStartTimeoutTest, IsExportedToTheRanks) {
  const RunResult r =
      run_hooprun(sh_job(1, "echo $HOOP_START_TIMEOUT", GetParam().options), GetParam().env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] " + GetParam().expected + "\n");
}

INSTANTIATE_TEST_SUITE_P(
    Sources, HooprunStartTimeoutTest,
    ::testing::Values(StartTimeoutCase{{}, {}, "30"},
                      StartTimeoutCase{{"--start-timeout", "7"}, {}, "7"},
                      StartTimeoutCase{{}, {"HOOP_START_TIMEOUT=45"}, "45"},
                      StartTimeoutCase{{}, {"HOROVOD_START_TIMEOUT=50"}, "50"},
                      StartTimeoutCase{{"--start-timeout=9"}, {"HOOP_START_TIMEOUT=45"}, "9"}));

struct MalformedVariableCase {
  std::vector<std::string> options;
  std::vector<std::string> env;
  std::string setting;  // NAME='value' as the error must quote it
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const MalformedVariableCase& c, std::ostream* os) { *os << c.setting; }

class HooprunMalformedVariableTest : public ::testing::TestWithParam<MalformedVariableCase> {};

// A malformed variable used to pass hooprun and end every rank with an error that named
// nothing; hooprun must refuse it, by name, before a single rank runs.
TEST_P(HooprunMalformedVariableTest, IsRefusedByNameBeforeAnyRankStarts) {
  TempDir dir;
  const std::string started = dir.file("started");
  const RunResult r = run_hooprun(
      sh_job(2, "touch '" + started + ".'$HOOP_RANK", GetParam().options), GetParam().env);
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(GetParam().setting + " is malformed"));
  EXPECT_THAT(r.err, HasSubstr("a number of seconds in (0, 31536000]"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a rank ran";
}

INSTANTIATE_TEST_SUITE_P(
    Timeouts, HooprunMalformedVariableTest,
    ::testing::Values(
        MalformedVariableCase{{}, {"HOOP_TIMEOUT_SECONDS=0"}, "HOOP_TIMEOUT_SECONDS='0'"},
        MalformedVariableCase{{}, {"HOOP_TIMEOUT_SECONDS=1e300"}, "HOOP_TIMEOUT_SECONDS='1e300'"},
        MalformedVariableCase{
            {}, {"HOROVOD_GLOO_TIMEOUT_SECONDS=nan"}, "HOROVOD_GLOO_TIMEOUT_SECONDS='nan'"},
        MalformedVariableCase{
            {"-x", "HOOP_TIMEOUT_SECONDS=1e300"}, {}, "HOOP_TIMEOUT_SECONDS='1e300'"},
        MalformedVariableCase{
            {"-x", "HOOP_TIMEOUT_SECONDS"}, {"HOOP_TIMEOUT_SECONDS=0"}, "HOOP_TIMEOUT_SECONDS='0'"},
        MalformedVariableCase{{"--mpi"}, {"HOOP_TIMEOUT_SECONDS=0"}, "HOOP_TIMEOUT_SECONDS='0'"}));

TEST(HooprunEnvTest, SecretIsOnNoCommandLine) {
  constexpr int kRanks = 2;
  TempDir dir;
  std::unique_ptr<Hooprun> hooprun =
      Hooprun::start(sh_job(kRanks, "echo $HOOP_SECRET > '" + dir.path() + "/secret.'$HOOP_RANK; " +
                                        sh_write_pid(dir) + sh_wait_for_go(dir)));
  ASSERT_TRUE(hooprun);
  const std::vector<pid_t> pids = wait_for_rank_pids(dir, kRanks);
  const std::optional<std::string> secret = wait_for_line(dir.file("secret.0"));
  ASSERT_TRUE(secret && secret->size() == 64u);

  std::vector<pid_t> everyone = pids;
  everyone.push_back(hooprun->pid());
  for (pid_t pid : everyone) {
    const std::optional<std::string> cmdline =
        read_file("/proc/" + std::to_string(pid) + "/cmdline");
    ASSERT_TRUE(cmdline.has_value()) << pid;
    EXPECT_THAT(*cmdline, Not(HasSubstr(*secret))) << "pid " << pid;
  }
  // The check above means something only if the secret is where it should be.
  const std::optional<std::string> environ =
      read_file("/proc/" + std::to_string(pids[0]) + "/environ");
  ASSERT_TRUE(environ.has_value());
  EXPECT_THAT(*environ, HasSubstr("HOOP_SECRET=" + *secret));

  write_file(dir.file("go"), "");
  const RunResult r = hooprun->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(HooprunEnvTest, VerbosePrintsThePlanButNotTheSecret) {
  const RunResult r = run_hooprun(sh_job(2, "echo $HOOP_SECRET", {"--verbose"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> out = split_lines(r.out);
  ASSERT_EQ(out.size(), 2u);
  const std::string secret = out[0].substr(4);
  ASSERT_EQ(secret.size(), 64u);
  EXPECT_THAT(r.err, Not(HasSubstr(secret)));
  EXPECT_THAT(r.err, HasSubstr("rendezvous store on 127.0.0.1:"));
  for (const char* expected : {"rank 0 (pid ", "rank 1 (pid ", "HOOP_RANK=0", "HOOP_RANK=1",
                               "HOOP_SIZE=2", "HOOP_JOB_ID=", "/bin/sh -c"}) {
    EXPECT_THAT(r.err, HasSubstr(expected));
  }
}

}  // namespace
}  // namespace hoop::launch::testing
