// Elastic rounds in a real store: what hooprun publishes and how workers join, move on to a
// newer round, learn they were removed, or name the ranks that never came.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "hoop/rendezvous.h"

namespace hoop {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class ElasticRound : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.secret = "secret";
    options.job_id = "job";
    auto server = StoreServer::start("127.0.0.1", 0, options);
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(*server);
    auto store = Store::connect("127.0.0.1", server_->port(), options);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    hooprun_ = std::move(*store);
  }

  BootstrapInfo worker(const std::string& id, std::chrono::milliseconds timeout = 20s) const {
    BootstrapInfo info;
    info.store_host = "127.0.0.1";
    info.store_port = server_->port();
    info.secret = "secret";
    info.job_id = "job";
    info.elastic_id = id;
    info.elastic_timeout = timeout;
    return info;
  }

  static ElasticPlace place(int rank, int size) {
    return ElasticPlace{rank, size, rank, size, 0, 1};
  }

  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<Store> hooprun_;
};

TEST_F(ElasticRound, WorkersJoinTheNewestRoundWithTheirPlaces) {
  EXPECT_EQ(*latest_elastic_round(*hooprun_), -1);
  ASSERT_TRUE(publish_elastic_round(*hooprun_, 0, {{"a", place(0, 1)}}).ok());
  ASSERT_TRUE(publish_elastic_round(
                  *hooprun_, 1,
                  {{"a", ElasticPlace{1, 2, 0, 1, 1, 2}}, {"b", ElasticPlace{0, 2, 0, 1, 0, 2}}})
                  .ok());
  EXPECT_EQ(*latest_elastic_round(*hooprun_), 1);
  std::vector<BootstrapInfo> infos{worker("a"), worker("b")};
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] { results[i] = join_elastic_round(infos[i], 0).status(); });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(infos[0].rank, 1);
  EXPECT_EQ(infos[0].cross_rank, 1);
  EXPECT_EQ(infos[1].rank, 0);
  EXPECT_EQ(infos[0].size, 2);
  EXPECT_EQ(infos[0].elastic_round, 1);
  EXPECT_EQ(infos[0].key_prefix, "hoop/e1");
}

TEST_F(ElasticRound, AWorkerLeftOutOfTheRoundIsToldItWasRemoved) {
  ASSERT_TRUE(publish_elastic_round(*hooprun_, 0, {{"a", place(0, 1)}}).ok());
  BootstrapInfo gone = worker("b");
  auto joined = join_elastic_round(gone, 0);
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().code(), StatusCode::kAborted);
  EXPECT_THAT(joined.status().message(), HasSubstr("elastic worker b is not part of round 0"));
}

TEST_F(ElasticRound, ARoundPublishedWhileRanksGatherReplacesIt) {
  // Round 0 waits for b, which never comes; round 1 (a alone) replaces it.
  ASSERT_TRUE(publish_elastic_round(*hooprun_, 0, {{"a", place(0, 2)}, {"b", place(1, 2)}}).ok());
  BootstrapInfo a = worker("a");
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    EXPECT_TRUE(publish_elastic_round(*hooprun_, 1, {{"a", place(0, 1)}}).ok());
  });
  auto joined = join_elastic_round(a, 0);
  later.join();
  ASSERT_TRUE(joined.ok()) << joined.status().to_string();
  EXPECT_EQ(a.elastic_round, 1);
  EXPECT_EQ(a.size, 1);
}

TEST_F(ElasticRound, AResetWaitsForARoundAfterItsOwn) {
  ASSERT_TRUE(publish_elastic_round(*hooprun_, 0, {{"a", place(0, 1)}}).ok());
  BootstrapInfo a = worker("a", 300ms);
  auto none = join_elastic_round(a, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(none.status().message(), HasSubstr("published no round 1"));
  EXPECT_THAT(none.status().message(), HasSubstr("HOOP_ELASTIC_TIMEOUT"));
}

TEST_F(ElasticRound, RanksThatNeverJoinAreNamed) {
  ASSERT_TRUE(publish_elastic_round(*hooprun_, 0,
                                    {{"a", place(0, 3)}, {"b", place(1, 3)}, {"c", place(2, 3)}})
                  .ok());
  BootstrapInfo a = worker("a", 500ms);
  auto alone = join_elastic_round(a, 0);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.status().code(), StatusCode::kTimeout);
  EXPECT_THAT(alone.status().message(), HasSubstr("2 of 3 ranks did not join"));
  EXPECT_THAT(alone.status().message(), HasSubstr("round 0: ranks 1, 2"));
}

TEST_F(ElasticRound, AMalformedPlaceIsAProtocolError) {
  ASSERT_TRUE(hooprun_->set("hoop/elastic/worker/0/a", "0 1 zero").ok());
  ASSERT_TRUE(hooprun_->set("hoop/elastic/round/0", "").ok());
  ASSERT_TRUE(hooprun_->set("hoop/elastic/latest", "0").ok());
  BootstrapInfo a = worker("a");
  auto joined = join_elastic_round(a, 0);
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().code(), StatusCode::kProtocolError);
  EXPECT_THAT(joined.status().message(), HasSubstr("'0 1 zero', not a rank layout"));
  ASSERT_TRUE(hooprun_->set("hoop/elastic/latest", "x").ok());
  EXPECT_EQ(latest_elastic_round(*hooprun_).status().code(), StatusCode::kProtocolError);
}

}  // namespace
}  // namespace hoop
