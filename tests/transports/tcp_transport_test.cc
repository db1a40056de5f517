// The TCP transport's data path between threads of one process, each its own rank: message
// sizes, ordering under many requests in flight, striping, length mismatches, orderly
// shutdown, deadlines, abort propagation and interface choice.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "tests/transports/tcp_test_util.h"
#include "tests/transports/transport_conformance.h"

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

class TcpSocketsTest : public TcpTest, public ::testing::WithParamInterface<int> {};

TEST_P(TcpSocketsTest, PingPongOfEverySizeArrivesIntact) {
  run_ranks(2, loopback_options(GetParam()), ping_pong_every_size);
}

TEST_P(TcpSocketsTest, AllPairsWithManyMessagesInFlightKeepOrder) {
  run_ranks(5, loopback_options(GetParam()),
            [](int rank, Transport& t) { all_pairs_keep_order(rank, 5, t, 40); });
}

INSTANTIATE_TEST_SUITE_P(SocketsPerPeer, TcpSocketsTest, ::testing::Values(1, 3));

TEST_P(TcpSocketsTest, LengthMismatchFailsTheReceiveNamingPeerAndLengthsAndTheStreamGoesOn) {
  run_ranks(2, loopback_options(GetParam()), length_mismatch_then_stream_goes_on);
}

TEST_F(TcpTest, LargeMessageSentLongBeforeItsReceiveIsBufferedThenDelivered) {
  tcp::TcpOptions o = loopback_options();
  o.socket_buffer_bytes = 256 << 10;  // so the 40 MiB message overruns the unexpected buffer
  std::vector<std::uint8_t> out(std::size_t{40} << 20), in(out.size());
  fill_pattern(out, 0, 1, 3);
  run_ranks(2, o, [&](int rank, Transport& t) {
    if (rank == 0) {
      const std::uint8_t tail = 42;
      auto a = t.send(1, out.data(), out.size());
      auto b = t.send(1, &tail, 1);
      ASSERT_TRUE(a.ok() && b.ok());
      const RequestId ids[] = {*a, *b};
      EXPECT_TRUE(t.wait(ids, test_deadline()).ok());
    } else {
      std::this_thread::sleep_for(milliseconds{300});
      std::uint8_t tail = 0;
      auto a = t.recv(0, in.data(), in.size());
      auto b = t.recv(0, &tail, 1);
      ASSERT_TRUE(a.ok() && b.ok());
      const RequestId ids[] = {*a, *b};
      const Status s = t.wait(ids, test_deadline());
      EXPECT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(pattern_mismatch(in, 0, 1, 3), -1);
      EXPECT_EQ(tail, 42);
    }
  });
}

TEST_F(TcpTest, TestPollsWithoutBlockingAndConsumes) {
  run_ranks(2, loopback_options(), [&](int rank, Transport& t) {
    int value = rank == 0 ? 1234 : 0;
    auto id = rank == 0 ? t.send(1, &value, sizeof value) : t.recv(0, &value, sizeof value);
    ASSERT_TRUE(id.ok());
    const Deadline deadline = test_deadline();
    bool done = false;
    while (!done && Clock::now() < deadline) {
      auto r = t.test(*id);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      done = *r;
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(value, 1234);
    EXPECT_EQ(t.test(*id).status().code(), StatusCode::kInvalidArgument);
  });
}

TEST_F(TcpTest, BadArgumentsAreRefused) {
  run_ranks(2, loopback_options(), [&](int rank, Transport& t) {
    char c = 0;
    EXPECT_EQ(t.send(rank, &c, 1).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.send(5, &c, 1).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.recv(-1, &c, 1).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.recv(1 - rank, nullptr, 1).status().code(), StatusCode::kInvalidArgument);
    const RequestId unknown = 999;
    EXPECT_EQ(wait_one(t, unknown, test_deadline()).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.name(), "tcp");
    EXPECT_EQ(t.size(), 2);
    EXPECT_EQ(t.rank(), rank);
  });
}

TEST_F(TcpTest, OrderlyShutdownDeliversEverythingSentThenFailsLaterReceives) {
  std::atomic<bool> sender_gone{false};
  run_ranks(2, loopback_options(), [&](int rank, Transport& t) {
    if (rank == 0) {
      int v = 77;
      auto id = t.send(1, &v, sizeof v);
      ASSERT_TRUE(id.ok());
      ASSERT_TRUE(wait_one(t, *id, test_deadline()).ok());
      return;  // the transport is destroyed here, in order
    }
    (void)sender_gone;
    std::this_thread::sleep_for(milliseconds{200});
    int v = 0;
    auto a = t.recv(0, &v, sizeof v);
    ASSERT_TRUE(a.ok());
    EXPECT_TRUE(wait_one(t, *a, test_deadline()).ok());
    EXPECT_EQ(v, 77);
    auto b = t.recv(0, &v, sizeof v);
    Status s = b.ok() ? wait_one(t, *b, test_deadline()) : b.status();
    EXPECT_EQ(s.code(), StatusCode::kPeerLost) << s.to_string();
    EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("shut its transport down"), std::string::npos) << s.message();
  });
}

TEST_F(TcpTest, WaitDeadlineNamesThePeerAndTheCauseReachesIt) {
  run_ranks(2, loopback_options(), [&](int rank, Transport& t) {
    int v = 0;
    if (rank == 0) {
      auto id = t.recv(1, &v, sizeof v);
      ASSERT_TRUE(id.ok());
      const Status s = wait_one(t, *id, Clock::now() + milliseconds{300});
      EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
      EXPECT_NE(s.message().find("receive of 4 bytes from rank 1"), std::string::npos)
          << s.message();
      // The transport is aborted: later requests fail at once with the same cause.
      EXPECT_EQ(t.send(1, &v, sizeof v).status().code(), StatusCode::kTimeout);
    } else {
      auto id = t.recv(0, &v, sizeof v);
      ASSERT_TRUE(id.ok());
      const Status s = wait_one(t, *id, test_deadline());
      EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
      EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s.message();
    }
  });
}

TEST_F(TcpTest, AbortCarriesTheCauseToEveryPeer) {
  run_ranks(3, loopback_options(), [&](int rank, Transport& t) {
    int v = 0;
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds{100});
      t.abort(peer_lost("rank 7 vanished (custom cause)"));
      t.abort(internal_error("a second abort is ignored"));
      EXPECT_EQ(t.send(0, &v, sizeof v).status().message(), "rank 7 vanished (custom cause)");
      return;
    }
    // Ranks 0 and 2 wait on each other, not on rank 1, and still learn its cause.
    auto id = t.recv(2 - rank, &v, sizeof v);
    ASSERT_TRUE(id.ok());
    const Status s = wait_one(t, *id, test_deadline());
    EXPECT_EQ(s.code(), StatusCode::kPeerLost) << s.to_string();
    EXPECT_NE(s.message().find("rank 7 vanished (custom cause)"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
  });
}

TEST_F(TcpTest, InterfaceByNameAndByAddress) {
  for (const char* iface : {"lo", "127.0.0.1", ""}) {
    SCOPED_TRACE(iface);
    tcp::TcpOptions o = loopback_options();
    o.iface = iface;
    o.key_prefix = std::string("mesh-") + iface;
    run_ranks(2, o, [&](int rank, Transport& t) {
      int v = rank == 0 ? 5 : 0;
      auto id = rank == 0 ? t.send(1, &v, sizeof v) : t.recv(0, &v, sizeof v);
      ASSERT_TRUE(id.ok());
      EXPECT_TRUE(wait_one(t, *id, test_deadline()).ok());
      EXPECT_EQ(v, 5);
    });
  }
}

TEST_F(TcpTest, UnknownInterfaceIsAClearError) {
  tcp::TcpOptions o = loopback_options();
  o.iface = "nosuchif0";
  auto t = connect(0, 2, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("nosuchif0"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("HOOP_IFACE"), std::string::npos) << t.status().message();
}

TEST(TcpOptionsTest, ReadFromTheEnvironment) {
  ::setenv("HOOP_IFACE", "lo", 1);
  ::setenv("HOOP_TCP_SOCKETS_PER_PEER", "3", 1);
  ::setenv("HOOP_TCP_BUFFER_BYTES", "8M", 1);
  auto o = tcp::tcp_options_from_env();
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->iface, "lo");
  EXPECT_EQ(o->sockets_per_peer, 3);
  EXPECT_EQ(o->socket_buffer_bytes, std::size_t{8} << 20);
  ::setenv("HOOP_TCP_SOCKETS_PER_PEER", "lots", 1);
  auto bad = tcp::tcp_options_from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HOOP_TCP_SOCKETS_PER_PEER"), std::string::npos);
  ::unsetenv("HOOP_IFACE");
  ::unsetenv("HOOP_TCP_SOCKETS_PER_PEER");
  ::unsetenv("HOOP_TCP_BUFFER_BYTES");
  auto defaults = tcp::tcp_options_from_env();
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->iface, "");
  EXPECT_EQ(defaults->sockets_per_peer, 1);
  EXPECT_EQ(defaults->socket_buffer_bytes, std::size_t{4} << 20);
}

TEST(TcpOptionsTest, SpinComesFromTheEnvironment) {
  ::unsetenv("HOOP_SPIN_US");
  auto defaults = tcp::tcp_options_from_env();
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->spin, std::chrono::microseconds(200));
  ::setenv("HOOP_SPIN_US", "7", 1);
  auto forced = tcp::tcp_options_from_env();
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->spin, std::chrono::microseconds(7));
  ::setenv("HOOP_SPIN_US", "-1", 1);
  auto bad = tcp::tcp_options_from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HOOP_SPIN_US"), std::string::npos);
  ::unsetenv("HOOP_SPIN_US");
}

}  // namespace
}  // namespace hoop::testing
