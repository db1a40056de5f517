#include "core/request_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "core/requests.h"

namespace hoop {
namespace {

struct Req {
  int peer = -1;
  bool done = false;
  Status status;
};

TEST(RequestTable, AnErasedIdIsUnknownEvenWhenItsSlotIsReused) {
  RequestTable<Req> t;
  auto [a, ra] = t.add();
  ra.peer = 7;
  EXPECT_NE(a, 0u);
  ASSERT_TRUE(t.contains(a));
  EXPECT_EQ(t.at(a).peer, 7);
  t.erase(a);
  EXPECT_FALSE(t.contains(a));
  EXPECT_TRUE(t.empty());
  auto [b, rb] = t.add();
  // The slot is reused, in its default state, under another id.
  EXPECT_NE(b, a);
  EXPECT_EQ(b & 0xffffffffu, a & 0xffffffffu);
  EXPECT_EQ(rb.peer, -1);
  EXPECT_FALSE(t.contains(a));
  EXPECT_TRUE(t.contains(b));
  t.erase(a);  // a consumed id: nothing happens
  EXPECT_TRUE(t.contains(b));
  EXPECT_FALSE(t.contains(0));
  EXPECT_FALSE(t.contains(b + 1000));
}

TEST(RequestTable, ReferencesStayPutWhileTheTableGrows) {
  RequestTable<Req> t;
  auto [first, r] = t.add();
  Req* where = &r;
  for (int i = 0; i < 10000; ++i) t.add();
  EXPECT_EQ(&t.at(first), where);
  EXPECT_EQ(t.size(), 10001u);
}

// Random adds and erases against a std::map that holds what the table should.
TEST(RequestTable, MatchesAMapUnderRandomUse) {
  RequestTable<Req> t;
  std::map<RequestId, int> model;
  std::vector<RequestId> gone;
  std::mt19937 rng(3);
  for (int step = 0; step < 20000; ++step) {
    if (model.empty() || rng() % 3 != 0) {
      auto [id, r] = t.add();
      r.peer = step;
      ASSERT_FALSE(model.contains(id));
      model[id] = step;
    } else {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      t.erase(it->first);
      gone.push_back(it->first);
      model.erase(it);
    }
  }
  EXPECT_EQ(t.size(), model.size());
  for (const auto& [id, peer] : model) {
    ASSERT_TRUE(t.contains(id));
    EXPECT_EQ(t.at(id).peer, peer);
  }
  for (RequestId id : gone) EXPECT_FALSE(t.contains(id)) << id;
  std::set<RequestId> seen;
  t.for_each([&](RequestId id, Req& r) {
    EXPECT_EQ(model.at(id), r.peer);
    seen.insert(id);
  });
  EXPECT_EQ(seen.size(), model.size());
  EXPECT_TRUE(t.any_of([&](const Req& r) { return r.peer == model.begin()->second; }));
  EXPECT_FALSE(t.any_of([](const Req& r) { return r.peer < 0; }));
}

TEST(Requests, ConsumingGivesTheFirstFailureAndForgetsTheIds) {
  RequestTable<Req> t;
  auto [a, ra] = t.add();
  auto [b, rb] = t.add();
  auto [c, rc] = t.add();
  rb.status = peer_lost("rank 2 left");
  rc.status = aborted("later");
  const std::array<RequestId, 4> ids{a, b, b, c};
  EXPECT_TRUE(check_requests_known(t, ids, "shm").ok());
  const Status s = consume_requests(t, ids);
  EXPECT_EQ(s.message(), "rank 2 left");
  EXPECT_TRUE(t.empty());
  const Status again = check_requests_known(t, std::span<const RequestId>(&b, 1), "shm");
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.message().find(fmt::format("shm: request {} is unknown", b)), std::string::npos);
}

TEST(Requests, TestRunsProgressOnceAndConsumesAFinishedRequest) {
  RequestTable<Req> t;
  auto [a, ra] = t.add();
  int passes = 0;
  const auto done = [](const Req& r) { return r.done; };
  Result<bool> first = test_request(t, a, "tcp", done, [&] { ++passes; });
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(*first);
  EXPECT_EQ(passes, 1);
  // The pass that finishes it may add requests of its own.
  Result<bool> second = test_request(t, a, "tcp", done, [&] {
    ++passes;
    t.add();
    t.at(a).done = true;
  });
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(*second);
  EXPECT_FALSE(t.contains(a));
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(test_request(t, a, "tcp", done, [] {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hoop
