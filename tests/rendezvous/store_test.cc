// The store's requests end to end over real sockets on 127.0.0.1: round trips, binary and
// large values, counters, waits, concurrency, and connect/stop behaviour.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/socket.h"
#include "tests/core/closed_port.h"
#include "tests/rendezvous/store_test_util.h"

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(StoreTest, SetGetRemoveRoundTrip) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->set("a", "1").ok());
  auto a = store->get("a");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(*a, "1");
  ASSERT_TRUE(store->set("a", "replaced").ok());
  EXPECT_EQ(*store->get("a"), "replaced");
  ASSERT_TRUE(store->set("empty", "").ok());
  EXPECT_EQ(*store->get("empty"), "");

  auto missing = store->get("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("\"nope\""), std::string::npos)
      << missing.status().message();

  auto removed = store->remove("a");
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(*removed);
  removed = store->remove("a");
  ASSERT_TRUE(removed.ok());
  EXPECT_FALSE(*removed);
  EXPECT_EQ(store->get("a").status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, ValuesSetByOneClientAreSeenByAnother) {
  auto writer = connect();
  auto reader = connect();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(writer->set("shared", "value").ok());
  EXPECT_EQ(*reader->get("shared"), "value");
  EXPECT_EQ(server_->stats().accepted, 2u);
}

TEST_F(StoreTest, AddKeepsADecimalCounter) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  auto v = store->add("n", 5);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, 5);
  EXPECT_EQ(*store->get("n"), "5");
  EXPECT_EQ(*store->add("n", -7), -2);
  EXPECT_EQ(*store->get("n"), "-2");
  EXPECT_EQ(*store->add("n", 0), -2);
  // A counter set by hand as text is a counter too.
  ASSERT_TRUE(store->set("m", "40").ok());
  EXPECT_EQ(*store->add("m", 2), 42);
}

TEST_F(StoreTest, AddRefusesNonCounterValuesAndOverflow) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  for (const char* text : {"abc", "", " 5", "5 ", "+5", "1.5", "99999999999999999999"}) {
    ASSERT_TRUE(store->set("x", text).ok());
    auto v = store->add("x", 1);
    ASSERT_FALSE(v.ok()) << "value '" << text << "' was taken as a counter";
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(v.status().message().find("not an add() counter"), std::string::npos)
        << v.status().message();
    EXPECT_EQ(*store->get("x"), text);  // left untouched
  }
  ASSERT_TRUE(store->set("big", std::to_string(INT64_MAX)).ok());
  auto overflow = store->add("big", 1);
  EXPECT_EQ(overflow.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(overflow.status().message().find("overflow"), std::string::npos);
  // The connection is still fine after refused requests.
  EXPECT_EQ(*store->add("fresh", 3), 3);
}

TEST_F(StoreTest, BinaryKeysAndValuesSurviveIntact) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  std::string value;
  for (int i = 0; i < 4096; ++i) value.push_back(static_cast<char>(i % 256));
  const std::string key("bin\0key\xff", 8);
  ASSERT_TRUE(store->set(key, value).ok());
  auto got = store->get(key);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, value);
  EXPECT_EQ(store->get("bin").status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, SixteenMebibyteValue) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  std::string value(std::size_t{16} << 20, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>((i * 131) >> 3);
  ASSERT_TRUE(store->set("big", value).ok());
  auto got = store->get("big");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(*got == value);
  // Small requests still work on the same connection afterwards.
  EXPECT_EQ(*store->add("after-big", 1), 1);
}

TEST_F(StoreTest, KeysAreValidatedBeforeSending) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->set("", "v").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->get("").status().code(), StatusCode::kInvalidArgument);
  const std::string longest(rendezvous::kMaxKeyBytes, 'k');
  EXPECT_TRUE(store->set(longest, "v").ok());
  EXPECT_EQ(*store->get(longest), "v");
  const Status too_long = store->set(longest + "k", "v");
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("4097 bytes"), std::string::npos) << too_long.message();
  EXPECT_EQ(store->wait({"ok", ""}, milliseconds{10}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->wait({"ok"}, milliseconds{-1}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(store->wait({}, milliseconds{0}).ok());
}

TEST_F(StoreTest, ValueLimitIsEnforcedOnBothSides) {
  StoreOptions small = test_options();
  small.max_value_bytes = 1000;
  start_server(small);
  auto store = connect(small);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->set("k", std::string(999, 'v')).ok());
  EXPECT_EQ(store->set("k", std::string(1000, 'v')).code(), StatusCode::kInvalidArgument);

  // A client configured with a larger limit than the server is refused by the server.
  auto lax = connect(test_options());
  ASSERT_NE(lax, nullptr);
  const Status refused = lax->set("k", std::string(2000, 'v'));
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.to_string();
  EXPECT_NE(refused.message().find("limit is 1000"), std::string::npos) << refused.message();
  // Past the frame cap (value limit + key + overhead) the frame itself is refused.
  const Status oversized = lax->set("k", std::string(10000, 'v'));
  EXPECT_FALSE(oversized.ok());
  EXPECT_NE(oversized.message().find("exceeds the limit"), std::string::npos)
      << oversized.to_string();
  EXPECT_TRUE(eventually([&] { return server_->stats().protocol_errors == 1; }));
  expect_store_serves("after-oversized");
}

TEST_F(StoreTest, AddFromManyThreadsGivesTheExactTotal) {
  constexpr int kThreads = 16;
  constexpr int kAddsPerThread = 200;
  auto shared = connect();
  ASSERT_NE(shared, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads share one client (serialized calls), half bring their own.
      std::unique_ptr<Store> own;
      Store* store = shared.get();
      if (t % 2 == 1) {
        auto connected = Store::connect("127.0.0.1", port_, test_options(), t);
        if (!connected.ok()) {
          ++failures;
          return;
        }
        own = std::move(connected).value();
        store = own.get();
      }
      for (int i = 0; i < kAddsPerThread; ++i) {
        if (!store->add("total", t + 1).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::int64_t expected = 0;
  for (int t = 0; t < kThreads; ++t) expected += std::int64_t{t + 1} * kAddsPerThread;
  EXPECT_EQ(*shared->get("total"), std::to_string(expected));
}

TEST_F(StoreTest, SixtyFourConcurrentClientsStayConsistent) {
  constexpr int kClients = 64;
  constexpr int kRounds = 5;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto connected = Store::connect("127.0.0.1", port_, test_options(), c);
      if (!connected.ok()) {
        errors[c] = connected.status().to_string();
        return;
      }
      Store& store = **connected;
      for (int r = 0; r < kRounds; ++r) {
        const std::string mine = "r" + std::to_string(r) + "/c" + std::to_string(c);
        const std::string next =
            "r" + std::to_string(r) + "/c" + std::to_string((c + 1) % kClients);
        const std::string value = "value of " + mine;
        Status s = store.set(mine, value);
        if (s.ok()) s = store.add("counter", 1).status();
        if (s.ok()) s = store.wait({next}, kTestTimeout);
        if (s.ok()) {
          auto got = store.get(next);
          if (!got.ok()) {
            s = got.status();
          } else if (*got != "value of " + next) {
            s = internal_error("read " + *got + " for " + next);
          }
        }
        if (!s.ok()) {
          errors[c] = s.to_string();
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(errors[c], "") << "client " << c;
  auto store = connect();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->get("counter"), std::to_string(kClients * kRounds));
  EXPECT_EQ(server_->stats().accepted, kClients + 1u);
  EXPECT_EQ(server_->stats().auth_failures, 0u);
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
}

TEST_F(StoreTest, WaitIsSatisfiedByAnotherClientLater) {
  auto waiter = connect();
  auto setter = connect();
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(setter, nullptr);
  auto waiting = std::async(std::launch::async, [&] {
    return waiter->wait({"x", "y"}, kTestTimeout);
  });
  ASSERT_TRUE(setter->set("x", "1").ok());
  // Give the waiter a chance to park with one key present; the result must not depend on it.
  std::this_thread::sleep_for(milliseconds{50});
  ASSERT_TRUE(setter->add("y", 1).ok());
  ASSERT_EQ(waiting.wait_for(kTestTimeout), std::future_status::ready);
  EXPECT_TRUE(waiting.get().ok());
  auto value = waiter->wait_get("x", kTestTimeout);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "1");
}

TEST_F(StoreTest, WaitWithAnUnboundedTimeoutIsReleasedBySet) {
  auto waiter = connect();
  auto setter = connect();
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(setter, nullptr);
  auto waiting =
      std::async(std::launch::async, [&] { return waiter->wait({"z"}, milliseconds::max()); });
  ASSERT_TRUE(setter->set("z", "1").ok());
  ASSERT_EQ(waiting.wait_for(kTestTimeout), std::future_status::ready);
  EXPECT_TRUE(waiting.get().ok());
}

TEST_F(StoreTest, WaitSeesAKeyThatComesBackAfterBeingDeleted) {
  auto waiter = connect();
  auto other = connect();
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->set("a", "1").ok());
  auto waiting = std::async(std::launch::async, [&] {
    return waiter->wait({"a", "b"}, kTestTimeout);
  });
  std::this_thread::sleep_for(milliseconds{20});
  ASSERT_TRUE(other->remove("a").ok());
  ASSERT_TRUE(other->set("b", "2").ok());
  ASSERT_TRUE(other->set("a", "3").ok());
  ASSERT_EQ(waiting.wait_for(kTestTimeout), std::future_status::ready);
  EXPECT_TRUE(waiting.get().ok());
}

TEST_F(StoreTest, WaitTimeoutListsTheMissingKeys) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->set("present", "1").ok());
  const Status s = store->wait({"present", "missing-1", "missing-2"}, milliseconds{100});
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find("\"missing-1\", \"missing-2\""), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("\"present\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("100 ms"), std::string::npos) << s.message();
  // The connection stays usable after a wait timed out.
  EXPECT_TRUE(store->wait({"present"}, milliseconds{0}).ok());
  EXPECT_EQ(store->wait({"missing-1"}, milliseconds{0}).code(), StatusCode::kTimeout);
  EXPECT_EQ(store->wait_get("missing-1", milliseconds{10}).status().code(), StatusCode::kTimeout);
}

TEST_F(StoreTest, AParkedWaiterDoesNotBlockOtherClients) {
  auto waiter = connect();
  auto busy = connect();
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(busy, nullptr);
  auto waiting =
      std::async(std::launch::async, [&] { return waiter->wait({"release"}, kTestTimeout); });
  for (int i = 0; i < 200; ++i) {
    const std::string key = "busy/" + std::to_string(i);
    ASSERT_TRUE(busy->set(key, "v").ok());
    ASSERT_TRUE(busy->get(key).ok());
    ASSERT_TRUE(busy->wait({key}, kTestTimeout).ok());
  }
  // The waiter is still parked: only `release` lets it go.
  EXPECT_EQ(waiting.wait_for(milliseconds{0}), std::future_status::timeout);
  ASSERT_TRUE(busy->set("release", "now").ok());
  ASSERT_EQ(waiting.wait_for(kTestTimeout), std::future_status::ready);
  EXPECT_TRUE(waiting.get().ok());
}

TEST_F(StoreTest, ACallQueuedBehindALongWaitTimesOutWithoutBreakingTheConnection) {
  StoreOptions options = test_options();
  options.timeout = milliseconds{200};
  auto store = connect(options);
  ASSERT_NE(store, nullptr);
  auto waiting =
      std::async(std::launch::async, [&] { return store->wait({"late"}, milliseconds{1500}); });
  std::this_thread::sleep_for(milliseconds{50});  // let the wait take the connection first
  const Status queued = store->set("other", "v");
  if (!queued.ok()) {
    EXPECT_EQ(queued.code(), StatusCode::kTimeout) << queued.to_string();
    EXPECT_NE(queued.message().find("earlier call"), std::string::npos) << queued.message();
  }
  ASSERT_EQ(waiting.wait_for(kTestTimeout), std::future_status::ready);
  EXPECT_EQ(waiting.get().code(), StatusCode::kTimeout);
  // Both calls are over and nothing is out of step: the connection still works.
  EXPECT_TRUE(store->set("other", "v").ok());
  EXPECT_EQ(*store->get("other"), "v");
}

TEST_F(StoreTest, ManyWaitersOnOneKeyAreAllReleased) {
  constexpr int kWaiters = 32;
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < kWaiters; ++i) {
    stores.push_back(connect());
    ASSERT_NE(stores.back(), nullptr);
  }
  std::vector<std::future<Status>> waits;
  for (auto& s : stores) {
    waits.push_back(std::async(std::launch::async, [&s] {
      return s->wait({"go", "go"}, kTestTimeout);
    }));
  }
  auto setter = connect();
  ASSERT_NE(setter, nullptr);
  ASSERT_TRUE(setter->set("go", "1").ok());
  for (auto& w : waits) {
    ASSERT_EQ(w.wait_for(kTestTimeout), std::future_status::ready);
    EXPECT_TRUE(w.get().ok());
  }
}

TEST_F(StoreTest, EmptySecretIsRefusedOnBothSides) {
  StoreOptions options = test_options();
  options.secret.clear();
  auto server = StoreServer::start("127.0.0.1", 0, options);
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  auto client = Store::connect("127.0.0.1", port_, options);
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("secret"), std::string::npos);
}

TEST_F(StoreTest, ConnectToNothingTimesOutNamingTheAddress) {
  const ClosedPort closed = closed_port();
  const std::uint16_t port = closed.port;
  StoreOptions options = test_options();
  options.timeout = milliseconds{300};
  auto store = Store::connect("127.0.0.1", port, options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kTimeout) << store.status().to_string();
  EXPECT_NE(store.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << store.status().message();
}

TEST_F(StoreTest, ConnectRetriesUntilTheServerIsUp) {
  ClosedPort closed = closed_port();
  const std::uint16_t port = closed.port;
  auto connecting = std::async(
      std::launch::async, [port] { return Store::connect("127.0.0.1", port, test_options(), 3); });
  std::this_thread::sleep_for(milliseconds{100});
  closed.holder.reset();
  auto server = StoreServer::start("127.0.0.1", port, test_options());
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  auto store = connecting.get();
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_TRUE((*store)->set("up", "1").ok());
}

TEST_F(StoreTest, StopWhileAClientWaitsGivesPeerLostNamingTheStore) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  auto waiting =
      std::async(std::launch::async, [&] { return store->wait({"never"}, kTestTimeout * 3); });
  std::this_thread::sleep_for(milliseconds{50});
  server_->stop();
  ASSERT_EQ(waiting.wait_for(kTestTimeout), std::future_status::ready);
  const Status s = waiting.get();
  EXPECT_EQ(s.code(), StatusCode::kPeerLost) << s.to_string();
  EXPECT_NE(s.message().find("store at 127.0.0.1:" + std::to_string(port_)), std::string::npos)
      << s.message();
  // Later calls fail the same way, at once.
  const Status later = store->set("k", "v");
  EXPECT_EQ(later.code(), StatusCode::kPeerLost) << later.to_string();
}

TEST_F(StoreTest, StopIsIdempotentAndClosesIdleClients) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  server_->stop();
  server_->stop();
  const Status s = store->set("k", "v");
  EXPECT_EQ(s.code(), StatusCode::kPeerLost) << s.to_string();
  EXPECT_NE(s.message().find("closed the connection"), std::string::npos) << s.message();
  StoreOptions quick = test_options();
  quick.timeout = milliseconds{200};
  EXPECT_EQ(Store::connect("127.0.0.1", port_, quick).status().code(), StatusCode::kTimeout);
  server_.reset();  // destroying a stopped server is fine too
}

}  // namespace
}  // namespace hoop::testing
