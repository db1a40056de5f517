#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <thread>

#include "core/config.h"
#include "core/socket.h"
#include "hoop/rendezvous.h"
#include "rendezvous/launchers.h"

namespace hoop {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Clears every variable bootstrap reads, then sets the test's own; restores nothing because
// each test runs in its own process under ctest.
class Bootstrap : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& v : config::all_vars()) {
      ::unsetenv(std::string(v.name).c_str());
      if (!v.horovod_alias.empty()) ::unsetenv(std::string(v.horovod_alias).c_str());
    }
    for (const char* name :
         {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
          "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_RANK", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
          "OMPI_MCA_orte_precondition_transports", "OMPI_MCA_orte_hnp_uri", "SLURM_PROCID",
          "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES", "SLURM_TASKS_PER_NODE",
          "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID",
          "SLURM_STEP_ID", "JOB_COMPLETION_INDEX", "HOSTNAME"})
      ::unsetenv(name);
  }
  void set(std::map<std::string, std::string> vars) {
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  Status error() {
    auto r = bootstrap_from_env();
    EXPECT_FALSE(r.ok());
    return r.status();
  }
};

TEST_F(Bootstrap, SingleProcessNeedsNothing) {
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->rank, 0);
  EXPECT_EQ(info->size, 1);
  EXPECT_EQ(info->launcher, "none");
  EXPECT_TRUE(info->store_host.empty());
}

TEST_F(Bootstrap, ReadsHooprunEnvironment) {
  set({{"HOOP_RANK", "2"},
       {"HOOP_SIZE", "4"},
       {"HOOP_LOCAL_RANK", "0"},
       {"HOOP_LOCAL_SIZE", "2"},
       {"HOOP_CROSS_RANK", "1"},
       {"HOOP_CROSS_SIZE", "2"},
       {"HOOP_RENDEZVOUS_ADDR", "127.0.0.1"},
       {"HOOP_RENDEZVOUS_PORT", "4567"},
       {"HOOP_SECRET", "s3"},
       {"HOOP_JOB_ID", "job7"},
       {"HOOP_START_TIMEOUT", "12"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->rank, 2);
  EXPECT_EQ(info->size, 4);
  EXPECT_EQ(info->local_rank, 0);
  EXPECT_EQ(info->local_size, 2);
  EXPECT_EQ(info->cross_rank, 1);
  EXPECT_EQ(info->cross_size, 2);
  EXPECT_EQ(info->store_host, "127.0.0.1");
  EXPECT_EQ(info->store_port, 4567);
  EXPECT_EQ(info->secret, "s3");
  EXPECT_EQ(info->job_id, "job7");
  EXPECT_EQ(info->start_timeout, 12000ms);
  // hooprun always sets HOOP_JOB_ID: the layout is hooprun's, not hand-set variables'.
  EXPECT_EQ(info->launcher, "hooprun");
}

TEST_F(Bootstrap, HorovodAliasesWork) {
  set({{"HOROVOD_RANK", "1"},
       {"HOROVOD_SIZE", "2"},
       {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "localhost"},
       {"HOROVOD_GLOO_RENDEZVOUS_PORT", "1234"},
       {"HOOP_SECRET", "x"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->rank, 1);
  EXPECT_EQ(info->store_host, "localhost");
  EXPECT_EQ(info->launcher, "env");  // variables set by hand (or by horovodrun's names)
}

TEST_F(Bootstrap, FallsBackToMpirunAndSlurmLayout) {
  set({{"OMPI_COMM_WORLD_RANK", "3"},
       {"OMPI_COMM_WORLD_SIZE", "4"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
       {"HOOP_RENDEZVOUS_ADDR", "h"},
       {"HOOP_RENDEZVOUS_PORT", "9"},
       {"HOOP_SECRET", "x"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->launcher, "mpirun");
  EXPECT_EQ(info->rank, 3);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->local_size, 2);
  EXPECT_EQ(info->cross_rank, 1);
  EXPECT_EQ(info->cross_size, 2);

  SetUp();
  set({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}});
  info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->launcher, "slurm");
}

TEST_F(Bootstrap, PmixRankWithSlurmSize) {
  set({{"PMIX_RANK", "1"},
       {"SLURM_NTASKS", "2"},
       {"HOOP_RENDEZVOUS_ADDR", "h"},
       {"HOOP_RENDEZVOUS_PORT", "9"},
       {"HOOP_SECRET", "x"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->launcher, "pmix");
  EXPECT_EQ(info->rank, 1);
  EXPECT_EQ(info->size, 2);
}

TEST_F(Bootstrap, MalformedValuesNameTheVariable) {
  set({{"HOOP_RANK", "one"}, {"HOOP_SIZE", "2"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_RANK='one'"));
  SetUp();
  set({{"OMPI_COMM_WORLD_RANK", "-2"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_THAT(error().message(), HasSubstr("OMPI_COMM_WORLD_RANK='-2'"));
  SetUp();
  set({{"HOOP_LOG_LEVEL", "loud"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_LOG_LEVEL='loud'"));
}

TEST_F(Bootstrap, InconsistentLayoutIsAnError) {
  set({{"HOOP_RANK", "4"}, {"HOOP_SIZE", "4"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_RANK=4 must be less than HOOP_SIZE=4"));
  SetUp();
  set({{"HOOP_RANK", "1"}});
  EXPECT_THAT(error().message(), HasSubstr("no job size"));
  SetUp();
  set({{"HOOP_RANK", "0"}, {"HOOP_SIZE", "2"}, {"HOOP_LOCAL_SIZE", "3"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_LOCAL_SIZE=3 exceeds HOOP_SIZE=2"));
}

TEST_F(Bootstrap, MultiRankJobNeedsStoreAndSecret) {
  set({{"HOOP_RANK", "0"}, {"HOOP_SIZE", "2"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_RENDEZVOUS_ADDR is not set"));
  set({{"HOOP_RENDEZVOUS_ADDR", "127.0.0.1"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_RENDEZVOUS_PORT is not"));
  set({{"HOOP_RENDEZVOUS_PORT", "1000"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_SECRET is not set"));
}

TEST_F(Bootstrap, ConnectStoreWaitsForAllRanksAndNamesTheMissing) {
  StoreOptions opts;
  opts.secret = "secret";
  opts.job_id = "job";
  auto server = StoreServer::start("127.0.0.1", 0, opts);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  BootstrapInfo info;
  info.size = 3;
  info.store_host = "127.0.0.1";
  info.store_port = (*server)->port();
  info.secret = "secret";
  info.job_id = "job";
  info.start_timeout = 300ms;
  auto alone = connect_store(info);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(alone.status().message(), HasSubstr("2 of 3 ranks did not join"));
  EXPECT_THAT(alone.status().message(), HasSubstr("ranks 1, 2"));

  info.start_timeout = 20s;
  std::vector<std::thread> ranks;
  std::vector<Status> results(3);
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      BootstrapInfo mine = info;
      mine.rank = r;
      auto store = connect_store(mine);
      results[r] = store.status();
    });
  }
  for (auto& t : ranks) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.to_string();

  info.secret = "wrong";
  auto refused = connect_store(info);
  EXPECT_EQ(refused.status().code(), StatusCode::kAuthFailed);
}

// --- jobs started without hooprun (rendezvous/launchers.h) ---

TEST(Nodelist, ExpandsSlurmHostLists) {
  using rendezvous::expand_nodelist;
  using V = std::vector<std::string>;
  EXPECT_EQ(*expand_nodelist("localhost", "L"), V{"localhost"});
  EXPECT_EQ(*expand_nodelist("node[01-03,07],gpu5", "L"),
            (V{"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(*expand_nodelist("n[8-11]", "L"), (V{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(*expand_nodelist("r[1-2]-n[1,3]", "L"), (V{"r1-n1", "r1-n3", "r2-n1", "r2-n3"}));
  EXPECT_EQ(*expand_nodelist("a,b[0009-0010].c", "L"), (V{"a", "b0009.c", "b0010.c"}));
  for (const char* bad : {"", "node[01-", "node01]", "n[3-1]", "n[a-b]", "a,,b", "n[1-2",
                          "n[[1]]", "n[1-99999999]"}) {
    auto r = expand_nodelist(bad, "SLURM_JOB_NODELIST");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("SLURM_JOB_NODELIST='")) << bad;
  }
}

TEST(Nodelist, ExpandsTasksPerNode) {
  using rendezvous::expand_tasks_per_node;
  EXPECT_EQ(*expand_tasks_per_node("2(x3),1", "T"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*expand_tasks_per_node("4", "T"), (std::vector<int>{4}));
  for (const char* bad : {"", "2(x", "2(x0)", "0", "x", "2,", "2(x3"}) {
    auto r = expand_tasks_per_node(bad, "SLURM_TASKS_PER_NODE");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("SLURM_TASKS_PER_NODE='")) << bad;
  }
}

TEST(Nodelist, DefaultPortIsStableAndInRange) {
  const std::uint16_t p = rendezvous::default_store_port("slurm-7.0");
  EXPECT_EQ(p, rendezvous::default_store_port("slurm-7.0"));
  EXPECT_GE(p, rendezvous::kDefaultStorePort);
  EXPECT_LT(p, rendezvous::kDefaultStorePort + rendezvous::kStorePortSpan);
}

TEST_F(Bootstrap, SlurmJobHostsTheStoreOnTheFirstNode) {
  set({{"SLURM_PROCID", "3"},
       {"SLURM_NTASKS", "5"},
       {"SLURM_LOCALID", "0"},
       {"SLURM_NODEID", "1"},
       {"SLURM_NNODES", "3"},
       {"SLURM_TASKS_PER_NODE", "3,1(x2)"},
       {"SLURM_JOB_NODELIST", "node[07-09]"},
       {"SLURM_JOB_ID", "42"},
       {"SLURM_STEP_ID", "1"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->launcher, "slurm");
  EXPECT_EQ(info->local_size, 1);
  EXPECT_EQ(info->cross_rank, 1);
  EXPECT_EQ(info->cross_size, 3);
  EXPECT_TRUE(info->host_store);
  EXPECT_EQ(info->store_host, "node07");
  EXPECT_EQ(info->job_id, "slurm-42.1");
  EXPECT_EQ(info->store_port, rendezvous::default_store_port("slurm-42.1"));
  EXPECT_EQ(info->secret.size(), 64u);  // derived; the same on every rank of the step
  const std::string derived = info->secret;
  set({{"HOOP_SECRET", "given"}, {"HOOP_RENDEZVOUS_PORT", "1234"}});
  info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->secret, "given");
  EXPECT_EQ(info->store_port, 1234);
  SetUp();
  set({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "node[07-09]"},
       {"SLURM_JOB_ID", "43"}});
  info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_NE(info->secret, derived);
}

TEST_F(Bootstrap, MalformedSlurmValuesNameTheVariable) {
  const std::map<std::string, std::string> good = {
      {"SLURM_PROCID", "0"},        {"SLURM_NTASKS", "2"},         {"SLURM_NODEID", "0"},
      {"SLURM_NNODES", "1"},        {"SLURM_TASKS_PER_NODE", "2"}, {"SLURM_JOB_ID", "9"},
      {"SLURM_JOB_NODELIST", "n1"}};
  const std::pair<std::string, std::string> bad[] = {
      {"SLURM_JOB_NODELIST", "n[1-"}, {"SLURM_TASKS_PER_NODE", "2(x"},
      {"SLURM_NODEID", "4"},          {"SLURM_JOB_ID", "abc"},
      {"SLURM_STEP_ID", "-1"},        {"SLURM_NTASKS", "two"}};
  for (const auto& [name, value] : bad) {
    SetUp();
    set(good);
    set({{name, value}});
    EXPECT_THAT(error().message(), HasSubstr(name + "=")) << name << "=" << value;
  }
  SetUp();
  set(good);
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_THAT(error().message(), HasSubstr("SLURM_JOB_ID is not set"));
}

TEST_F(Bootstrap, MpirunOnOneHostUsesLoopbackAndAcrossHostsNeedsTheAddress) {
  set({{"OMPI_COMM_WORLD_RANK", "1"},
       {"OMPI_COMM_WORLD_SIZE", "2"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
       {"PMIX_NAMESPACE", "1013776385"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->store_host, "127.0.0.1");
  EXPECT_EQ(info->job_id.rfind("mpirun-", 0), 0u);
  set({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}});
  EXPECT_THAT(error().message(), HasSubstr("set HOOP_RENDEZVOUS_ADDR"));
  set({{"HOOP_RENDEZVOUS_ADDR", "10.0.0.1"}});
  info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->store_host, "10.0.0.1");
  ::unsetenv("PMIX_NAMESPACE");
  EXPECT_THAT(error().message(), HasSubstr("PMIX_NAMESPACE"));
}

TEST_F(Bootstrap, KubernetesIndexedJobUsesTheHostPattern) {
  set({{"JOB_COMPLETION_INDEX", "2"},
       {"HOOP_SIZE", "4"},
       {"HOSTNAME", "trainer-2"},
       {"HOOP_HOST_PATTERN", "trainer-{index}.trainer-svc"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->launcher, "kubernetes");
  EXPECT_EQ(info->rank, 2);
  EXPECT_EQ(info->local_size, 1);
  EXPECT_EQ(info->cross_rank, 2);
  EXPECT_EQ(info->store_host, "trainer-0.trainer-svc");
  EXPECT_EQ(info->job_id, "k8s-trainer");
  set({{"HOOP_HOST_PATTERN", "trainer.svc"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_HOST_PATTERN='trainer.svc'"));
  ::unsetenv("HOOP_HOST_PATTERN");
  EXPECT_THAT(error().message(), HasSubstr("HOOP_HOST_PATTERN is not set"));
}

std::uint16_t unused_port() {
  auto listener = net::listen_tcp("127.0.0.1", 0);
  EXPECT_TRUE(listener.ok());
  return listener->port;  // closed on return: nobody listens there now
}

TEST_F(Bootstrap, RankZeroHostsTheStoreAndTheOthersWaitForIt) {
  const std::string port = std::to_string(unused_port());
  set({{"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "127.0.0.1,n2"}, {"SLURM_JOB_ID", "5"},
       {"HOOP_RENDEZVOUS_PORT", port}, {"HOOP_START_TIMEOUT", "1"},
       {"HOOP_TIMEOUT_SECONDS", "1"}, {"SLURM_PROCID", "1"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  // Rank 0 never starts: rank 1 gives up after HOOP_START_TIMEOUT, naming where it looked.
  auto orphan = connect_store(*info);
  ASSERT_FALSE(orphan.ok());
  EXPECT_THAT(orphan.status().message(), HasSubstr("127.0.0.1:" + port));
  EXPECT_THAT(orphan.status().message(), HasSubstr("slurm job"));

  info->start_timeout = info->timeout = 20s;
  std::vector<Status> results(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      BootstrapInfo mine = *info;
      mine.rank = r;
      auto store = connect_store(mine);
      results[r] = store.status();
      if (store.ok()) results[r] = (*store)->set("k" + std::to_string(r), "v");
    });
  }
  for (auto& t : ranks) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST_F(Bootstrap, AnElasticWorkerNeedsHooprunsStore) {
  set({{"HOOP_ELASTIC_ID", "0@a:0"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_ELASTIC_ID is set but HOOP_RENDEZVOUS_ADDR"));
  set({{"HOOP_RENDEZVOUS_ADDR", "127.0.0.1"},
       {"HOOP_RENDEZVOUS_PORT", "1000"},
       {"HOOP_SECRET", "s"},
       {"HOOP_ELASTIC_TIMEOUT", "12"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->elastic_id, "0@a:0");
  EXPECT_EQ(info->elastic_timeout, 12s);
  set({{"HOOP_ELASTIC_TIMEOUT", "soon"}});
  EXPECT_THAT(error().message(), HasSubstr("HOOP_ELASTIC_TIMEOUT"));
}

}  // namespace
}  // namespace hoop
