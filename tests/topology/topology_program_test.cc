// hoop-topology as users run it: under hooprun, alone, and as two processes that claim to be on
// different hosts (HOOP_HOST_ID per process, which hooprun cannot give) joined by a store that
// the test serves itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "hoop/rendezvous.h"
#include "tests/launch/hooprun_harness.h"

namespace hoop::topology {
namespace {

using launch::testing::count_lines_with;
using launch::testing::run_hooprun;
using launch::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kProgram = std::string(HOOP_TEST_BIN_DIR) + "/hoop-topology";

TEST(HoopTopology, TwoRanksUnderHooprun) {
  const RunResult r = run_hooprun({"-np", "2", kProgram});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[0] hosts: 1, ranks: 2 (2 per host)\n"));
  EXPECT_THAT(r.out, HasSubstr("[0]   ranks: 0-1\n"));
  EXPECT_EQ(count_lines_with(r.out, "[0]   cpus: ", " usable by rank 0)"), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "[0]   nics: "), 1) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "[0]   gpus: "), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("[0] transport: shm within the host (HOOP_TRANSPORT=auto)\n"));
  EXPECT_THAT(r.out, HasSubstr("[0] ring: 0-1 (within one host)\n"));
  // Only rank 0 prints, and hooprun's layout agrees with the host ids.
  EXPECT_EQ(count_lines_with(r.out, "[1]"), 0) << r.out;
  EXPECT_THAT(r.err, Not(HasSubstr("warning"))) << r.err;
}

TEST(HoopTopology, TransportChoiceIsShown) {
  const RunResult r = run_hooprun({"-np", "3", kProgram}, {"HOOP_TRANSPORT=tcp"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[0] transport: tcp within the host (HOOP_TRANSPORT=tcp)\n"));
}

// Starts hoop-topology with only `env` as its environment, its stderr joined to its stdout.
FILE* start_clean(const std::string& env, const std::string& args = "") {
  const std::string command =
      "timeout 60 env -i PATH=/usr/bin:/bin " + env + " " + kProgram + " " + args + " 2>&1";
  return ::popen(command.c_str(), "r");
}

// Reads everything `p` prints until it exits; returns its wait status and its output.
std::pair<int, std::string> finish(FILE* p) {
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  return {::pclose(p), out};
}

std::pair<int, std::string> run_clean(const std::string& env, const std::string& args = "") {
  return finish(start_clean(env, args));
}

TEST(HoopTopology, OneRankWithoutAStore) {
  auto [status, out] = run_clean("HOOP_HOST_ID=solo");
  ASSERT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("hosts: 1, ranks: 1 (1 per host)\n"));
  EXPECT_THAT(out, HasSubstr("(id solo)\n"));
  EXPECT_THAT(out, HasSubstr("transport: none, one rank (HOOP_TRANSPORT=auto)\n"));
}

TEST(HoopTopology, BadUsageAndBadEnvironmentFailClearly) {
  auto [usage_status, usage] = run_clean("", "--frobnicate");
  EXPECT_NE(usage_status, 0);
  EXPECT_THAT(usage, HasSubstr("usage: hoop-topology"));
  auto [env_status, env] = run_clean("HOOP_TRANSPORT=pigeon");
  EXPECT_NE(env_status, 0);
  EXPECT_THAT(env, HasSubstr("hoop-topology: "));
  EXPECT_THAT(env, HasSubstr("HOOP_TRANSPORT"));
}

// Two ranks with different HOOP_HOST_IDs but no local layout from the "launcher": the summary
// shows two hosts, and each rank warns that the launcher's (default) layout disagrees.
TEST(HoopTopology, TwoHostsAndALauncherThatDisagrees) {
  StoreOptions options;
  options.secret = "topology-test-secret";
  options.job_id = "topology-test";
  auto server = StoreServer::start("127.0.0.1", 0, options);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  const std::string common = "HOOP_SIZE=2 HOOP_RENDEZVOUS_ADDR=127.0.0.1 HOOP_RENDEZVOUS_PORT=" +
                             std::to_string((*server)->port()) + " HOOP_SECRET=" + options.secret +
                             " HOOP_JOB_ID=" + options.job_id;
  FILE* rank1 = start_clean(common + " HOOP_RANK=1 HOOP_HOST_ID=host-b");
  auto [status0, out0] = run_clean(common + " HOOP_RANK=0 HOOP_HOST_ID=host-a");
  auto [status1, out1] = finish(rank1);

  ASSERT_EQ(status0, 0) << out0;
  ASSERT_EQ(status1, 0) << out1;
  EXPECT_THAT(out0, HasSubstr("hosts: 2, ranks: 2 (1 per host)\n"));
  EXPECT_THAT(out0, HasSubstr("host 0: "));
  EXPECT_THAT(out0, HasSubstr("(id host-a)\n"));
  EXPECT_THAT(out0, HasSubstr("(id host-b)\n"));
  EXPECT_THAT(out0, HasSubstr("transport: tcp across hosts (HOOP_TRANSPORT=auto)\n"));
  EXPECT_THAT(out0, HasSubstr("ring: 0 | 1 (crosses between hosts 2 times)\n"));
  EXPECT_THAT(out0, HasSubstr("warning: rank 0: the launcher (hooprun) gives local size 2 "
                              "(HOOP_LOCAL_SIZE) but the host ids give 1"));
  EXPECT_THAT(out0, HasSubstr("warning: rank 0: the launcher (hooprun) gives cross size 1 "
                              "(HOOP_CROSS_SIZE) but the host ids give 2"));
  EXPECT_THAT(out1, HasSubstr("warning: rank 1: the launcher (hooprun) gives local rank 1 "
                              "(HOOP_LOCAL_RANK) but the host ids give 0"));
  EXPECT_THAT(out1, HasSubstr("warning: rank 1: the launcher (hooprun) gives cross rank 0 "
                              "(HOOP_CROSS_RANK) but the host ids give 1"));
  EXPECT_THAT(out1, Not(HasSubstr("hosts:")));
  (*server)->stop();
}

}  // namespace
}  // namespace hoop::topology
