// Elastic jobs of real processes on one machine: fake hosts through --spawner "env
// FAKEHOST={host}" and a discovery script that reads a file the test rewrites. Each worker runs
// elastic_worker, whose counter proves that no step was lost or repeated across resets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>

#include "tests/launch/hooprun_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class HooprunElastic : public ::testing::Test {
 protected:
  void SetUp() override {
    hosts("a:1\nb:1\nc:1\n");
    write_file(dir_.file("discover.sh"), "#!/bin/sh\ncat " + dir_.file("hosts") + "\n", 0755);
  }

  void hosts(const std::string& text) { write_file(dir_.file("hosts"), text); }

  std::unique_ptr<Hooprun> start(const std::vector<std::string>& options, int steps,
                                 const std::string& mode = "",
                                 const std::vector<std::string>& env = {}) {
    std::vector<std::string> args{"--host-discovery-script", dir_.file("discover.sh"), "--spawner",
                                  "env FAKEHOST={host}"};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back(HOOP_ELASTIC_WORKER_BIN);
    args.push_back(std::to_string(steps));
    if (!mode.empty()) args.push_back(mode);
    return Hooprun::start(args, env);
  }

  // The pid that the worker on `host` announced.
  static pid_t worker_pid(Hooprun& job, const std::string& host) {
    std::string found;
    const std::regex ready("READY host=" + host + " pid=([0-9]+)");
    job.wait_for_output([&](const std::string& out, const std::string&) {
      std::smatch m;
      if (!std::regex_search(out, m, ready)) return false;
      found = m[1];
      return true;
    });
    return found.empty() ? -1 : static_cast<pid_t>(std::stoi(found));
  }

  static bool saw(Hooprun& job, const std::string& text) {
    return job.wait_for_output(
        [&](const std::string&, const std::string& err) { return err.find(text) != err.npos; });
  }

  TempDir dir_;
};

TEST_F(HooprunElastic, ALostWorkerShrinksTheJobAndItsHostComingBackGrowsIt) {
  auto job = start({"-np", "3", "--min-np", "2"}, 400);
  ASSERT_TRUE(job);
  const pid_t victim = worker_pid(*job, "c");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  ASSERT_TRUE(saw(*job, "host c is blacklisted"));
  ASSERT_TRUE(saw(*job, "round 1: 2 workers on 2 hosts"));
  // Still listed, c stays out; gone and listed again, it is a new machine.
  hosts("a:1\nb:1\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  hosts("a:1\nb:1\nc:1\n");
  ASSERT_TRUE(saw(*job, "round 2: 3 workers on 3 hosts, 1 new"));
  const RunResult r = job->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines_with(r.out, "DONE", "size 3 value 400"), 3) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("restoring the last commit"));
}

TEST_F(HooprunElastic, ALostWorkerIsReplacedOnAFreeHostAtOnce) {
  // --max-np 2 leaves c free; the worker started there as b's exit is handled is hooprun's
  // third process, started while it looks at the others' exits.
  auto job = start({"-np", "2", "--max-np", "2"}, 300);
  ASSERT_TRUE(job);
  const pid_t victim = worker_pid(*job, "b");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  ASSERT_TRUE(saw(*job, "round 1: 2 workers on 2 hosts, 1 new"));
  const RunResult r = job->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines_with(r.out, "DONE", "size 2 value 300"), 2) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "READY host=c"), 1) << r.out;
}

// A worker that stops answering (SIGSTOP) ends no process: the others' collectives time out,
// they report the round failed, and hooprun stops the silent worker HOOP_TIMEOUT_SECONDS after
// the first report, blacklists its host and starts the next round on the free host c, instead
// of everyone waiting out the elastic timeout (600 s).
TEST_F(HooprunElastic, AStoppedWorkerIsReplacedAfterTheOthersReportTheRound) {
  auto job = start({"-np", "2", "--max-np", "2"}, 400, "", {"HOOP_TIMEOUT_SECONDS=2"});
  ASSERT_TRUE(job);
  const pid_t victim = worker_pid(*job, "b");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  ASSERT_TRUE(saw(*job, "(rank 1 of round 0) has not answered since the round failed"));
  ASSERT_TRUE(saw(*job, "host b is blacklisted"));
  ASSERT_TRUE(saw(*job, "round 1: 2 workers on 2 hosts, 1 new"));
  const RunResult r = job->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines_with(r.out, "DONE", "size 2 value 400"), 2) << r.out << r.err;
  EXPECT_EQ(::kill(victim, 0), -1) << "the stopped worker outlived the job";
}

// The same while another worker dies: the dead worker's exit starts round 1 at once, with the
// stopped one in it, which never joins. The survivor, waiting for it there, reported round 0;
// the stopped worker neither reported round 0 nor joined round 1, so hooprun stops it and
// starts round 2 without it, which the survivor joins instead.
TEST_F(HooprunElastic, AStoppedWorkerDoesNotHoldUpTheRoundAfterAnotherWorkersDeath) {
  auto job = start({"-np", "3", "--min-np", "1"}, 400, "", {"HOOP_TIMEOUT_SECONDS=2"});
  ASSERT_TRUE(job);
  const pid_t stopped = worker_pid(*job, "c");
  const pid_t killed = worker_pid(*job, "b");
  ASSERT_GT(stopped, 0);
  ASSERT_GT(killed, 0);
  ASSERT_EQ(::kill(stopped, SIGSTOP), 0);
  ASSERT_EQ(::kill(killed, SIGKILL), 0);
  ASSERT_TRUE(saw(*job, "has not answered since the round failed"));
  ASSERT_TRUE(saw(*job, "1 worker on 1 host"));
  const RunResult r = job->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines_with(r.out, "DONE", "size 1 value 400"), 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("host c is blacklisted"));
}

// A round that fails on every worker while none ends (both stall on tensors the other never
// submits): all report it, and hooprun starts the next round with the same workers, which go
// back to their last commit and finish exactly.
TEST_F(HooprunElastic, ARoundEveryWorkerReportsFailedStartsAgainWithTheSameWorkers) {
  auto job = start({"-np", "3"}, 50, "stall", {"HOOP_STALL_SHUTDOWN_SECONDS=1"});
  ASSERT_TRUE(job);
  ASSERT_TRUE(saw(*job, "round 0 failed on every worker"));
  ASSERT_TRUE(saw(*job, "round 1: 3 workers on 3 hosts"));
  const RunResult r = job->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines_with(r.out, "DONE", "size 3 value 50"), 3) << r.out << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("blacklisted")));
}

TEST_F(HooprunElastic, AHostTheScriptDropsHasItsWorkerStopped) {
  auto job = start({"-np", "3", "--min-np", "2"}, 300);
  ASSERT_TRUE(job);
  ASSERT_GT(worker_pid(*job, "b"), 0);
  hosts("a:1\nc:1\n");
  ASSERT_TRUE(saw(*job, "host b is gone; stopping worker 1"));
  const RunResult r = job->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines_with(r.out, "DONE", "size 2 value 300"), 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("round 1: 2 workers on 2 hosts"));
}

TEST_F(HooprunElastic, ARoundTheFinishedJobNeverJoinedHasItsNewWorkersStopped) {
  hosts("a:1\nb:1\n");
  auto job = start({"-np", "2", "--elastic-timeout", "600"}, 300, "nocommit");
  ASSERT_TRUE(job);
  ASSERT_GT(worker_pid(*job, "a"), 0);
  hosts("a:1\nb:1\nc:1\n");
  ASSERT_TRUE(saw(*job, "round 1: 3 workers on 3 hosts, 1 new"));
  // a and b finish in round 0; c would wait for them in round 1 until the elastic timeout.
  const RunResult r = job->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the job ended before round 1 began; stopping worker 2"));
  EXPECT_EQ(count_lines_with(r.out, "DONE", "size 2 value 300"), 2) << r.out << r.err;
}

TEST_F(HooprunElastic, TheResetLimitEndsTheJob) {
  auto job = start({"-np", "3", "--min-np", "2", "--reset-limit", "0"}, 100000);
  ASSERT_TRUE(job);
  const pid_t victim = worker_pid(*job, "a");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const RunResult r = job->wait();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("it was reset 0 times already (--reset-limit)"));
}

TEST_F(HooprunElastic, TooFewSlotsEndTheJobAfterTheElasticTimeoutNamingTheScriptsError) {
  write_file(dir_.file("discover.sh"), "#!/bin/sh\necho 'inventory offline' >&2\nexit 3\n", 0755);
  const RunResult r = run_hooprun({"-np", "2", "--host-discovery-script", dir_.file("discover.sh"),
                                   "--elastic-timeout", "1", HOOP_ELASTIC_WORKER_BIN, "10"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("the host discovery script '" + dir_.file("discover.sh") +
                               "' exited with code 3: inventory offline"));
  EXPECT_THAT(r.err, HasSubstr("0 worker slots available, fewer than the 2 needed"));
}

TEST_F(HooprunElastic, MalformedDiscoveryOutputIsNamed) {
  hosts("a:1\nb:many\n");
  const RunResult r = run_hooprun({"-np", "1", "--host-discovery-script", dir_.file("discover.sh"),
                                   "--elastic-timeout", "1", HOOP_ELASTIC_WORKER_BIN, "10"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(dir_.file("discover.sh") + ":2: bad line 'b:many'"));
}

TEST_F(HooprunElastic, AMissingDiscoveryScriptIsAnError) {
  const RunResult r = run_hooprun({"-np", "1", "--host-discovery-script", dir_.file("absent.sh"),
                                   HOOP_ELASTIC_WORKER_BIN, "10"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_THAT(r.err, HasSubstr("--host-discovery-script"));
}

TEST_F(HooprunElastic, AFailureNoResetCanCureIsNotRetried) {
  auto job = start({"-np", "2", "--elastic-timeout", "2"}, 50, "mismatch");
  ASSERT_TRUE(job);
  const RunResult r = job->wait();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("elastic_worker: "));
  EXPECT_THAT(r.err, HasSubstr("'one'"));
  EXPECT_THAT(r.err, Not(HasSubstr("restoring the last commit")));
}

}  // namespace
}  // namespace hoop::launch::testing
