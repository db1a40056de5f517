#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <thread>

#include "core/config.h"
#include "hoop/rendezvous.h"

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
    for (const char* name : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                             "PMIX_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"})
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
  EXPECT_EQ(info->launcher, "env");
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

// Under mpirun the store is optional: HOOP_TRANSPORT=mpi takes the layout from MPI itself, and
// any other transport says it needs a store when the Communicator is created.
TEST_F(Bootstrap, MpirunJobMayGoWithoutAStore) {
  set({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  auto info = bootstrap_from_env();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->launcher, "mpirun");
  EXPECT_TRUE(info->store_host.empty());
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

}  // namespace
}  // namespace hoop
