// The UCX transport between threads of one process, each its own rank with its own UCP context
// and worker, over UCX's TCP and its shared-memory (posix) transports (UCX_TLS, set before the
// configuration is read): the shared conformance bodies, poll/wake, ranks outside the mesh,
// set-up errors and options.
#include "transports/ucx/ucx_transport.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "tests/transports/tcp_test_util.h"
#include "tests/transports/transport_conformance.h"

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

inline constexpr const char* kUcxJobId = "ucx-test-job";

/// Every rank of `size` but `rank`.
std::vector<int> all_but(int rank, int size) {
  std::vector<int> peers;
  for (int r = 0; r < size; ++r)
    if (r != rank) peers.push_back(r);
  return peers;
}

ucx::UcxOptions ucx_test_options() {
  ucx::UcxOptions o;
  o.connect_timeout = milliseconds{20000};
  return o;
}

// The parameter is UCX_TLS: "tcp" (UCX's sockets) or "posix" (shared memory; "self" serves
// nothing here, every rank has a worker of its own).
class UcxTest : public TcpTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    TcpTest::SetUp();
    ::setenv("UCX_TLS", GetParam(), 1);
  }
  void TearDown() override { ::unsetenv("UCX_TLS"); }

  Result<std::unique_ptr<Transport>> connect_ucx(int rank, int size, std::vector<int> peers = {},
                                                 const ucx::UcxOptions& o = ucx_test_options()) {
    if (peers.empty()) peers = all_but(rank, size);
    auto s = store(rank);
    if (s == nullptr) return internal_error("no store");
    return ucx::connect(*s, rank, size, peers, kUcxJobId, o);
  }

  void run_ucx_ranks(int size, const std::function<void(int, Transport&)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        auto t = connect_ucx(r, size);
        ASSERT_TRUE(t.ok()) << "rank " << r << ": " << t.status().to_string();
        body(r, **t);
      });
    }
    for (auto& t : threads) t.join();
  }
};

TEST_P(UcxTest, PingPongOfEverySizeArrivesIntact) { run_ucx_ranks(2, ping_pong_every_size); }

TEST_P(UcxTest, AllPairsWithManyMessagesInFlightKeepOrder) {
  run_ucx_ranks(4, [](int rank, Transport& t) { all_pairs_keep_order(rank, 4, t, 30); });
}

TEST_P(UcxTest, EmptyMessagesInARowComplete) {
  run_ucx_ranks(4, [](int rank, Transport& t) { empty_messages_in_a_row(rank, 4, t); });
}

TEST_P(UcxTest, LengthMismatchFailsTheReceiveNamingPeerAndLengthsAndTheStreamGoesOn) {
  run_ucx_ranks(2, length_mismatch_then_stream_goes_on);
}

TEST_P(UcxTest, BigMessageSentLongBeforeItsReceive) {
  run_ucx_ranks(2, big_message_long_before_its_receive);
}

TEST_P(UcxTest, TestPollsWithoutBlockingAndConsumes) {
  run_ucx_ranks(2, test_polls_without_blocking_and_consumes);
}

TEST_P(UcxTest, OrderlyShutdownDeliversEverythingSentThenFailsLaterReceives) {
  run_ucx_ranks(2, orderly_shutdown_then_later_receives_fail);
}

TEST_P(UcxTest, WaitDeadlineNamesThePeerAndTheCauseReachesIt) {
  run_ucx_ranks(2, wait_deadline_names_the_peer_and_aborts);
}

TEST_P(UcxTest, AbortCarriesTheCauseToEveryPeer) {
  run_ucx_ranks(3, abort_carries_the_cause_to_every_peer);
}

TEST_P(UcxTest, BadArgumentsAndRanksOutsideTheMeshAreRefused) {
  // Ranks 0 and 1 are connected over UCX; rank 2 of the job is reached some other way.
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto tr = connect_ucx(rank, 3, {1 - rank});
      ASSERT_TRUE(tr.ok()) << tr.status().to_string();
      Transport& t = **tr;
      bad_arguments_are_refused(rank, t);
      char c = 0;
      const Status outside = t.send(2, &c, 1).status();
      EXPECT_EQ(outside.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(outside.message().find("rank 2"), std::string::npos) << outside.message();
      EXPECT_EQ(t.name(), "ucx");
      EXPECT_FALSE(t.accepts_device_memory());
      EXPECT_EQ(t.size(), 3);
    });
  }
  for (auto& th : threads) th.join();
}

TEST_P(UcxTest, WakeFromAnotherThreadEndsAPollAndAMessageEndsOneToo) {
  run_ucx_ranks(2, [&](int rank, Transport& t) {
    int v = 0;
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds{200});
      v = 5;
      auto id = t.send(0, &v, sizeof v);
      ASSERT_TRUE(id.ok());
      EXPECT_TRUE(wait_one(t, *id, test_deadline()).ok());
      return;
    }
    auto polled = std::async(std::launch::async, [&] { t.poll(std::chrono::seconds{60}); });
    std::this_thread::sleep_for(milliseconds{50});
    t.wake();
    EXPECT_EQ(polled.wait_for(std::chrono::seconds{20}), std::future_status::ready);
    polled.get();
    t.wake();
    t.poll(std::chrono::seconds{60});
    auto id = t.recv(1, &v, sizeof v);
    ASSERT_TRUE(id.ok());
    const Deadline deadline = test_deadline();
    while (v != 5 && Clock::now() < deadline) t.poll(std::chrono::seconds{60});
    EXPECT_EQ(v, 5);
    EXPECT_TRUE(wait_one(t, *id, test_deadline()).ok());
  });
}

TEST_P(UcxTest, ConnectTimeoutNamesTheMissingRanks) {
  ucx::UcxOptions o = ucx_test_options();
  o.connect_timeout = milliseconds{500};
  auto t = connect_ucx(0, 3, {}, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kTimeout) << t.status().to_string();
  EXPECT_NE(t.status().message().find("1, 2"), std::string::npos) << t.status().message();
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxTest, ::testing::Values("tcp", "posix"),
                         [](const auto& p) { return std::string(p.param); });

class UcxSetUpTest : public TcpTest {};

TEST_F(UcxSetUpTest, BadArgumentsAndAnotherJobsAddressAreRefused) {
  auto s = store(0);
  ASSERT_NE(s, nullptr);
  const std::vector<std::vector<int>> bad_peers = {{0}, {3}, {1, 1}, {-1}};
  for (const auto& peers : bad_peers) {
    EXPECT_EQ(ucx::connect(*s, 0, 3, peers, kUcxJobId, ucx_test_options()).status().code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ucx::connect(*s, 0, 2, std::vector<int>{1}, "", ucx_test_options()).status().code(),
            StatusCode::kInvalidArgument);
  // Rank 1 of another job published under the same key prefix: its address is not used.
  ASSERT_TRUE(s->set("hoop/ucx/addr/1", "other-job\nhost\n1\naddress").ok());
  auto t = ucx::connect(*s, 0, 2, std::vector<int>{1}, kUcxJobId, ucx_test_options());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kAuthFailed) << t.status().to_string();
  EXPECT_NE(t.status().message().find("other-job"), std::string::npos) << t.status().message();
}

// What `hooprun --check-build` asks: UCX opens over its tcp transport here; a UCX_TLS that names
// no transport UCX has is refused, and the answer says what UCX refused.
TEST(UcxUsableTest, OpensOverTcpAndSaysWhyNot) {
  EXPECT_NE(ucx::ucx_version(), "");
  std::string why;
  ::setenv("UCX_TLS", "tcp", 1);
  EXPECT_TRUE(ucx::ucx_usable(&why)) << why;
  ::setenv("UCX_TLS", "no_such_transport", 1);
  EXPECT_FALSE(ucx::ucx_usable(&why));
  EXPECT_NE(why.find("ucx:"), std::string::npos) << why;
  ::unsetenv("UCX_TLS");
}

TEST(UcxOptionsTest, ReadFromTheEnvironment) {
  ::unsetenv("HOOP_SPIN_US");
  ::setenv("HOOP_START_TIMEOUT", "2.5", 1);
  auto set = ucx::ucx_options_from_env();
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->spin, std::chrono::microseconds(200));
  EXPECT_EQ(set->connect_timeout, milliseconds(2500));
  ::setenv("HOOP_SPIN_US", "lots", 1);
  auto bad = ucx::ucx_options_from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HOOP_SPIN_US"), std::string::npos)
      << bad.status().message();
  ::unsetenv("HOOP_SPIN_US");
  ::unsetenv("HOOP_START_TIMEOUT");
}

}  // namespace
}  // namespace hoop::testing
