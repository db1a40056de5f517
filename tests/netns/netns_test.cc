// Jobs across simulated hosts. Each case runs inside tests/netns/testbed.sh (see
// CMakeLists.txt), which exports the namespaces (TESTBED_NS), the bridge address and the spawner;
// hooprun places two ranks on each of two namespaces. The cases assume no transport: ranks on
// one host may talk over TCP or shared memory, ranks on different hosts over the veth links.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/launch/hooprun_harness.h"

namespace hoop {
namespace {

using launch::testing::count_lines_with;
using launch::testing::Hooprun;
using launch::testing::run_hooprun;
using launch::testing::RunResult;
using Clock = std::chrono::steady_clock;

/// Inside the bed's 50 s; bounds a broken run, never a speed check.
constexpr std::chrono::seconds kDeadline{40};

struct Testbed {
  std::vector<std::string> hosts;
  std::string bridge_addr;
  std::string spawner;
};

std::optional<Testbed> testbed_from_env() {
  const char* ns = std::getenv("TESTBED_NS");
  const char* addr = std::getenv("TESTBED_BRIDGE_ADDR");
  const char* spawner = std::getenv("TESTBED_SPAWNER");
  if (ns == nullptr || addr == nullptr || spawner == nullptr) return std::nullopt;
  Testbed bed{{}, addr, spawner};
  std::istringstream words(ns);
  for (std::string name; words >> name;) bed.hosts.push_back(name);
  if (bed.hosts.size() < 2) return std::nullopt;
  return bed;
}

class Netns : public ::testing::Test {
 protected:
  void SetUp() override {
    std::optional<Testbed> bed = testbed_from_env();
    if (!bed) GTEST_SKIP() << "needs two simulated hosts: run through testbed.sh (ctest -L netns)";
    bed_ = std::move(*bed);
  }

  /// hooprun's options for two ranks on each of the first two hosts, then `rest`.
  std::vector<std::string> job(const std::vector<std::string>& rest) const {
    std::vector<std::string> args{"-np",
                                  "4",
                                  "-H",
                                  bed_.hosts[0] + ":2," + bed_.hosts[1] + ":2",
                                  "--spawner",
                                  bed_.spawner,
                                  "--rendezvous-addr",
                                  bed_.bridge_addr};
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
  }

  /// Runs `program` (which prints "looping" on each rank once it runs) on the two hosts with
  /// HOOP_TIMEOUT_SECONDS=5 and `env`, pulls the second host's cable once all four loop, and
  /// returns how the job ended, `seconds` after the cut (a timed-out result when the ranks
  /// never started looping).
  RunResult cut_while_looping(const std::vector<std::string>& program,
                              const std::vector<std::string>& env, double& seconds) {
    std::vector<std::string> all_env = {"HOOP_TIMEOUT_SECONDS=5"};
    all_env.insert(all_env.end(), env.begin(), env.end());
    std::unique_ptr<Hooprun> hooprun = Hooprun::start(job(program), all_env);
    if (!hooprun) {
      RunResult failed;
      failed.timed_out = true;
      return failed;
    }
    const bool looping = hooprun->wait_for_output(
        [](const std::string& out, const std::string&) {
          return count_lines_with(out, "looping") == 4;
        },
        std::chrono::seconds(20));
    EXPECT_TRUE(looping) << "the ranks never started looping";
    if (!looping) return hooprun->wait(std::chrono::seconds(1));
    const std::string down = std::string(HOOP_TESTBED) + " link-down " + bed_.hosts[1];
    EXPECT_EQ(std::system(down.c_str()), 0) << down;
    const auto start = Clock::now();
    RunResult r = hooprun->wait(std::chrono::seconds(30));
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return r;
  }

  Testbed bed_;
};

std::vector<std::string> shm_segments_of(const std::string& id) {
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("hoop-" + id + "-")) left.push_back(name);
  }
  return left;
}

TEST_F(Netns, RanksLandOnTheirHostsWithTheirLayout) {
  const RunResult r =
      run_hooprun(job({"/bin/sh", "-c",
                       "echo layout $HOOP_RANK $HOOP_LOCAL_RANK $HOOP_LOCAL_SIZE $HOOP_CROSS_RANK "
                       "$HOOP_CROSS_SIZE $HOOP_RENDEZVOUS_ADDR $(ip netns identify $$)"}),
                  {}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string& a = bed_.hosts[0];
  const std::string& b = bed_.hosts[1];
  const std::string addr = bed_.bridge_addr;
  EXPECT_EQ(count_lines_with(r.out, "[0] layout 0 0 2 0 2 " + addr + " " + a), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "[1] layout 1 1 2 0 2 " + addr + " " + a), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "[2] layout 2 0 2 1 2 " + addr + " " + b), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "[3] layout 3 1 2 1 2 " + addr + " " + b), 1) << r.out;
}

TEST_F(Netns, CollectivesAcrossHostsMatchTheReference) {
  const RunResult r = run_hooprun(job({HOOP_COMM_CHECK_BIN, "check"}), {}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), 4) << r.out << r.err;
}

// Under a token bucket the kernel queues and paces packets; megabyte messages (--big) fill it,
// and nothing may be lost, reordered or timed out.
TEST_F(Netns, CollectivesOverRateLimitedLinks) {
  const RunResult r = run_hooprun(job({HOOP_COMM_CHECK_BIN, "check", "--algos", "ring,tree,hierarchical,auto",
                                       "--counts", "0,7,1023", "--big"}),
                                  {}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "checked", "cases"), 4) << r.out << r.err;
}

// Rank 3 (second host) SIGKILLs itself between large allreduces; every other rank, on either
// host, must fail naming it, and the job must leave no shared-memory segment behind.
TEST_F(Netns, KilledRankIsNamedByEveryOtherRank) {
  const RunResult r =
      run_hooprun(job({"--verbose", HOOP_COMM_CHECK_BIN, "kill", "3", "3"}), {}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "allreduce failed", "rank 3"), 3) << r.out << r.err;
  const std::string id = launch::testing::verbose_job_id(r.err);
  ASSERT_FALSE(id.empty()) << r.err;
  EXPECT_TRUE(shm_segments_of(id).empty()) << shm_segments_of(id).front();
}

// The second host's cable is pulled while every rank loops over allreduces: the ranks must
// report the lost peers within HOOP_TIMEOUT_SECONDS, and hooprun must end, not hang.
TEST_F(Netns, LinkDownIsReportedWithinTheDeadline) {
  double seconds = 0;
  const RunResult r = cut_while_looping({HOOP_COMM_CHECK_BIN, "loop", "60"}, {}, seconds);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  // Which rank a rank names depends on where in the ring it waited (a peer whose receive
  // timed out, or one that aborted and passed the cause on), so the check is that each report
  // is a timeout or a lost peer naming some rank. Every rank's collective began before the
  // link went down, so every rank reports within HOOP_TIMEOUT_SECONDS, before hooprun's grace
  // period for ranks that ignore SIGTERM has run out.
  for (int rank = 0; rank < 4; ++rank) {
    const std::string failed = fmt::format("[{0}] rank {0}: allreduce failed", rank);
    EXPECT_EQ(count_lines_with(r.out, failed, ": timeout: ") +
                  count_lines_with(r.out, failed, ": peer lost: "),
              1)
        << r.out << r.err;
    for (const std::string& line : launch::testing::split_lines(r.out)) {
      if (line.starts_with(failed)) {
        const std::string rest = line.substr(failed.size());
        bool names_a_rank = false;
        for (int r2 = 0; r2 < 4; ++r2)
          names_a_rank = names_a_rank || rest.find(fmt::format("rank {}", r2)) != std::string::npos;
        EXPECT_TRUE(names_a_rank) << line;
      }
    }
  }
  // HOOP_TIMEOUT_SECONDS, plus hooprun's grace period for ranks that ignore SIGTERM.
  EXPECT_LT(seconds, 20.0) << r.out << r.err;
}

// A partition of a training job (the runtime, whose ranks leave SIGTERM's default action as a
// real program does): both sides see the other stop answering at about the same time, and
// hooprun must give the ranks still running time to say so before it ends them, so that every
// rank's log names what happened to it, not only the side that noticed first.
TEST_F(Netns, EveryRankOfAPartitionedJobReportsItsOwnCause) {
  double seconds = 0;
  const RunResult r =
      cut_while_looping({HOOP_CHAOS_RANK_BIN, "rt_loop"}, {"CHAOS_KEEP_SIGTERM=1"}, seconds);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  // A rank reports the peer its control plane stopped hearing from, or the receive of its data
  // plane that timed out: which one comes first depends on where each rank was.
  for (int rank = 0; rank < 4; ++rank) {
    const std::string failed = fmt::format("[{0}] rank {0}: failed after", rank);
    EXPECT_EQ(count_lines_with(r.out, failed, "has not answered") +
                  count_lines_with(r.out, failed, "did not complete before the deadline"),
              1)
        << r.out << r.err;
  }
}

TEST_F(Netns, TopologyRunsAcrossHosts) {
  const std::string program = std::string(HOOP_TEST_BIN_DIR) + "/hoop-topology";
  if (::access(program.c_str(), X_OK) != 0) GTEST_SKIP() << program << " is not built";
  const RunResult r = run_hooprun(job({"--topology"}), {}, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[0] "), std::string::npos) << r.out << r.err;
}

// Every namespace has a loopback interface, but a probe listening on one host's lo cannot be
// reached from another: the preflight must name both hosts and the interface, and no rank may
// start. The default interface (eth0 on the bridge) passes, as every other case here shows.
TEST_F(Netns, PreflightNamesTheHostsAndTheInterfaceThatCannotConnect) {
  launch::testing::TempDir dir;
  const RunResult r = run_hooprun(
      job({"--network-interface", "lo", "/bin/sh", "-c", "touch '" + dir.path() + "/started'"}), {},
      kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string& a = bed_.hosts[0];
  const std::string& b = bed_.hosts[1];
  EXPECT_THAT(r.err, ::testing::HasSubstr("hooprun: preflight: host '" + a +
                                          "' cannot connect to host '" + b + "' at 127.0.0.1:"))
      << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("over interface 'lo': ")) << r.err;
  EXPECT_EQ(count_lines_with(r.err, "host '" + b + "' cannot connect to host '" + a + "'"), 1)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("started")));
}

}  // namespace
}  // namespace hoop
