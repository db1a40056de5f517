#include "launch/rank_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hoop::launch {
namespace {

using ::testing::Contains;
using ::testing::IsSupersetOf;
using ::testing::Not;

JobEnv two_rank_job() {
  JobEnv job;
  job.size = 2;
  job.rendezvous_addr = "127.0.0.1";
  job.rendezvous_port = 4242;
  job.secret = "s3cr3t";
  job.job_id = "job1";
  job.start_timeout_s = 2.5;
  return job;
}

TEST(RankEnvironmentTest, SetsTheLaunchersVariables) {
  const std::vector<std::string> env = rank_environment({}, two_rank_job(), 1);
  EXPECT_THAT(
      env, IsSupersetOf({"HOOP_RANK=1", "HOOP_SIZE=2", "HOOP_LOCAL_RANK=1", "HOOP_LOCAL_SIZE=2",
                         "HOOP_CROSS_RANK=0", "HOOP_CROSS_SIZE=1", "HOOP_RENDEZVOUS_ADDR=127.0.0.1",
                         "HOOP_RENDEZVOUS_PORT=4242", "HOOP_SECRET=s3cr3t", "HOOP_JOB_ID=job1",
                         "HOOP_START_TIMEOUT=2.5"}));
}

TEST(RankEnvironmentTest, KeepsTheRestAndReplacesStaleValues) {
  const std::vector<std::string> inherited{"PATH=/bin",       "HOOP_RANK=5",
                                           "HOROVOD_RANK=6",  "HOOP_LOG_LEVEL=debug",
                                           "HOOP_SECRET=old", "EMPTY="};
  const std::vector<std::string> env = rank_environment(inherited, two_rank_job(), 0);
  EXPECT_THAT(env, IsSupersetOf({"PATH=/bin", "HOOP_LOG_LEVEL=debug", "EMPTY=", "HOOP_RANK=0",
                                 "HOOP_SECRET=s3cr3t"}));
  EXPECT_THAT(env, Not(Contains("HOOP_RANK=5")));
  EXPECT_THAT(env, Not(Contains("HOROVOD_RANK=6")));
  EXPECT_THAT(env, Not(Contains("HOOP_SECRET=old")));
}

TEST(RankEnvironmentTest, AJobAcrossHostsGivesEachRankItsHostsLayout) {
  JobEnv job = two_rank_job();
  job.size = 5;
  job.places = {{0, 0, 3}, {0, 1, 3}, {0, 2, 3}, {1, 0, 2}, {1, 1, 2}};
  job.num_hosts = 2;
  EXPECT_THAT(rank_environment({}, job, 2),
              IsSupersetOf({"HOOP_RANK=2", "HOOP_SIZE=5", "HOOP_LOCAL_RANK=2", "HOOP_LOCAL_SIZE=3",
                            "HOOP_CROSS_RANK=0", "HOOP_CROSS_SIZE=2"}));
  const std::vector<std::string> stale{"HOROVOD_CROSS_RANK=7"};
  EXPECT_THAT(rank_environment(stale, job, 4),
              IsSupersetOf({"HOOP_RANK=4", "HOOP_LOCAL_RANK=1", "HOOP_LOCAL_SIZE=2",
                            "HOOP_CROSS_RANK=1", "HOOP_CROSS_SIZE=2"}));
  EXPECT_THAT(rank_environment(stale, job, 4), Not(Contains("HOROVOD_CROSS_RANK=7")));
}

TEST(RankEnvironmentTest, HorovodsNamesCarryTheSameLayout) {
  JobEnv job = two_rank_job();
  job.size = 5;
  job.places = {{0, 0, 3}, {0, 1, 3}, {0, 2, 3}, {1, 0, 2}, {1, 1, 2}};
  job.num_hosts = 2;
  const std::vector<std::string> stale{"HOROVOD_RANK=9"};
  const std::vector<std::string> env = rank_environment(stale, job, 3);
  EXPECT_THAT(env, IsSupersetOf({"HOROVOD_RANK=3", "HOROVOD_SIZE=5", "HOROVOD_LOCAL_RANK=0",
                                 "HOROVOD_LOCAL_SIZE=2", "HOROVOD_CROSS_RANK=1",
                                 "HOROVOD_CROSS_SIZE=2"}));
  EXPECT_THAT(env, Not(Contains("HOROVOD_RANK=9")));
}

TEST(RankEnvironmentTest, StartTimeoutIsWrittenPlainly) {
  JobEnv job = two_rank_job();
  job.start_timeout_s = 30;
  EXPECT_THAT(rank_environment({}, job, 0), Contains("HOOP_START_TIMEOUT=30"));
}

TEST(RankEnvironmentTest, AnElasticWorkerGetsItsNameAndNoRankLayout) {
  const std::vector<std::string> inherited{"HOOP_RANK=3", "HOROVOD_SIZE=9", "HOOP_LOG_LEVEL=info",
                                           "HOME=/root"};
  const std::vector<std::string> env =
      elastic_environment(inherited, two_rank_job(), "4@hostb:1", 30);
  EXPECT_THAT(env, IsSupersetOf({"HOOP_ELASTIC_ID=4@hostb:1", "HOOP_ELASTIC_TIMEOUT=30",
                                 "HOOP_RENDEZVOUS_ADDR=127.0.0.1", "HOOP_RENDEZVOUS_PORT=4242",
                                 "HOOP_SECRET=s3cr3t", "HOOP_JOB_ID=job1", "HOOP_LOG_LEVEL=info",
                                 "HOME=/root"}));
  // Its rank comes from the store, round by round: a stale one must not contradict it.
  for (const char* stale : {"HOOP_RANK=", "HOOP_SIZE=", "HOROVOD_SIZE=", "HOOP_LOCAL_RANK="}) {
    for (const std::string& e : env) EXPECT_FALSE(e.starts_with(stale)) << e;
  }
}

}  // namespace
}  // namespace hoop::launch
