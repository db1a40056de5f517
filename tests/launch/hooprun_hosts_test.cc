// hooprun across hosts without a second machine: hosts that are names of this one start
// directly, others go through a spawner that is a plain local command (env), so the tests see
// the substitution, the per-host layout, the store address and the clean-up. Real namespaces
// are in tests/netns.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/socket.h"
#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kLayout[] =
    "echo layout $HOOP_RANK $HOOP_LOCAL_RANK $HOOP_LOCAL_SIZE $HOOP_CROSS_RANK $HOOP_CROSS_SIZE "
    "$SPAWNED_ON";

std::vector<std::string> sh_args(std::vector<std::string> options, const std::string& script) {
  options.insert(options.end(), {"/bin/sh", "-c", script});
  return options;
}

TEST(HooprunHostsTest, LocalHostsStartDirectlyWithTheirLayout) {
  const RunResult r = run_hooprun(sh_args({"-H", "localhost:2,127.0.0.1", "--verbose"}, kLayout));
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "[0] layout 0 0 2 0 2"), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "[1] layout 1 1 2 0 2"), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "[2] layout 2 0 1 1 2"), 1) << r.out;
  EXPECT_THAT(r.err, HasSubstr("3 ranks on 2 hosts, rendezvous store on 127.0.0.1:"));
  EXPECT_THAT(r.err, HasSubstr("rank 2 on 127.0.0.1 (pid"));
}

TEST(HooprunHostsTest, SpawnerStartsEveryRankWithItsHostSubstituted) {
  const RunResult r =
      run_hooprun(sh_args({"-np", "3", "-H", "alpha:1,beta:4", "--spawner", "env SPAWNED_ON={host}",
                           "--rendezvous-addr", "127.0.0.1"},
                          kLayout));
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "[0] layout 0 0 1 0 2 alpha"), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "[1] layout 1 0 2 1 2 beta"), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "[2] layout 2 1 2 1 2 beta"), 1) << r.out;
}

TEST(HooprunHostsTest, RemoteHostsGetAnExternalStoreAddressByDefault) {
  Result<std::optional<std::string>> external = net::first_external_ipv4();
  ASSERT_TRUE(external.ok());
  if (!*external) GTEST_SKIP() << "no non-loopback IPv4 interface is up here";
  const RunResult r = run_hooprun(
      sh_args({"-H", "localhost,elsewhere", "--spawner", "env"}, "echo at $HOOP_RENDEZVOUS_ADDR"));
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "at " + **external), 2) << r.out;
}

// Without a spawner another host is reached over ssh; port 1 of a loopback address refuses at
// once, so the preflight names the host before any rank starts. (hooprun_ssh_test.cc runs
// jobs through a real sshd.)
TEST(HooprunHostsTest, ARemoteHostWithoutSpawnerIsReachedOverSsh) {
  TempDir dir;
  const RunResult r = run_hooprun(
      sh_args({"-H", "localhost,127.0.0.3", "-p", "1"}, "touch '" + dir.path() + "/started'"));
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  if (::access("/usr/bin/ssh", X_OK) == 0) {
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, HasSubstr("preflight: host '127.0.0.3' is not reachable over ssh (port 1)"));
  } else {
    EXPECT_THAT(r.err, HasSubstr("host '127.0.0.3' is not this machine and is reached over ssh"));
  }
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(std::filesystem::exists(dir.file("started")));
}

TEST(HooprunHostsTest, HostfileListsTheHosts) {
  TempDir dir;
  write_file(dir.file("hosts"), "# this machine twice\nlocalhost slots=2\n127.0.0.1:1\n");
  const RunResult r = run_hooprun(sh_args({"--hostfile", dir.file("hosts")}, kLayout));
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines_with(r.out, "layout 2 0 1 1 2"), 1) << r.out;
  write_file(dir.file("hosts"), "localhost\nlocalhost slots=2\n");
  const RunResult bad = run_hooprun(sh_args({"--hostfile", dir.file("hosts")}, "true"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr(dir.file("hosts") + ":2: host 'localhost' is listed twice"));
}

TEST(HooprunHostsTest, TooManyRanksForTheSlotsIsAUsageError) {
  const RunResult r = run_hooprun(sh_args({"-np", "5", "-H", "localhost:4"}, "true"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("-np 5 exceeds the 4 slots"));
}

TEST(HooprunHostsTest, AMissingSpawnerIsNotFound) {
  const RunResult r =
      run_hooprun(sh_args({"-H", "a", "--spawner", "hoop-no-such-spawner {host}"}, "true"));
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_THAT(r.err, HasSubstr("hoop-no-such-spawner"));
}

// A crash before the shared-memory transport unlinks its segments leaves them named;
// hooprun sweeps the job's names whether the job failed or not.
TEST(HooprunHostsTest, SharedMemorySegmentsOfTheJobAreRemoved) {
  // Each rank waits (bounded) for the other's segment, so that a failing rank cannot stop
  // the other before it made one.
  const std::string both =
      "touch /dev/shm/hoop-$HOOP_JOB_ID-test$HOOP_RANK; n=0; "
      "while [ ! -e /dev/shm/hoop-$HOOP_JOB_ID-test$((1 - HOOP_RANK)) ] && [ $n -lt 1000 ]; "
      "do sleep 0.01; n=$((n+1)); done; ";
  for (const char* end : {"exit 0", "exit 3"}) {
    const RunResult r = run_hooprun(sh_args({"-np", "2", "--verbose"}, both + end));
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, std::string(end) == "exit 0" ? 0 : 3) << r.err;
    const std::string id = verbose_job_id(r.err);
    ASSERT_FALSE(id.empty()) << r.err;
    EXPECT_FALSE(std::filesystem::exists("/dev/shm/hoop-" + id + "-test0"));
    EXPECT_FALSE(std::filesystem::exists("/dev/shm/hoop-" + id + "-test1"));
    EXPECT_THAT(r.err, HasSubstr("removed 2 shared-memory segments"));
  }
}

// hoop-topology is looked up next to the hooprun executable, wherever that is.
TEST(HooprunHostsTest, TopologyRunsTheProgramNextToHooprun) {
  TempDir dir;
  std::filesystem::copy_file(HOOP_TEST_BIN_DIR "/hooprun", dir.file("hooprun"));
  const std::vector<std::string> args{"--topology", "-H", "localhost:2,127.0.0.1"};
  RunResult r = Hooprun::start_at(dir.file("hooprun"), args)->wait();
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_THAT(r.err, HasSubstr(dir.file("hoop-topology")));

  write_file(dir.file("hoop-topology"), "#!/bin/sh\necho topology $HOOP_RANK of $HOOP_SIZE\n",
             0755);
  r = Hooprun::start_at(dir.file("hooprun"), args)->wait();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "topology", "of 3"), 3) << r.out;
}

}  // namespace
}  // namespace hoop::launch::testing
