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

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

class TcpSocketsTest : public TcpTest, public ::testing::WithParamInterface<int> {};

TEST_P(TcpSocketsTest, PingPongOfEverySizeArrivesIntact) {
  const std::vector<std::size_t> sizes = {
      0, 1, 7, 4096, (std::size_t{1} << 20) + 3, std::size_t{64} << 20};
  run_ranks(2, loopback_options(GetParam()), [&](int rank, Transport& t) {
    const int peer = 1 - rank;
    for (std::size_t m = 0; m < sizes.size(); ++m) {
      std::vector<std::uint8_t> out(sizes[m]), in(sizes[m]);
      if (rank == 0) {
        fill_pattern(out, 0, 1, m);
        auto s = t.send(peer, out.data(), out.size());
        ASSERT_TRUE(s.ok()) << s.status().to_string();
        ASSERT_TRUE(wait_one(t, *s, test_deadline()).ok());
        auto r = t.recv(peer, in.data(), in.size());
        ASSERT_TRUE(r.ok());
        const Status st = wait_one(t, *r, test_deadline());
        ASSERT_TRUE(st.ok()) << st.to_string();
        EXPECT_EQ(pattern_mismatch(in, 1, 0, m), -1) << "size " << sizes[m];
      } else {
        auto r = t.recv(peer, in.data(), in.size());
        ASSERT_TRUE(r.ok());
        const Status st = wait_one(t, *r, test_deadline());
        ASSERT_TRUE(st.ok()) << st.to_string();
        EXPECT_EQ(pattern_mismatch(in, 0, 1, m), -1) << "size " << sizes[m];
        fill_pattern(out, 1, 0, m);
        auto s = t.send(peer, out.data(), out.size());
        ASSERT_TRUE(s.ok());
        ASSERT_TRUE(wait_one(t, *s, test_deadline()).ok());
      }
    }
  });
}

TEST_P(TcpSocketsTest, AllPairsWithManyMessagesInFlightKeepOrder) {
  constexpr int kRanks = 5;
  constexpr std::size_t kMessages = 40;
  auto size_of = [](int src, int dst, std::size_t m) -> std::size_t {
    const std::size_t sizes[] = {0, 1, 13, 4096, 70000, 300001};
    return sizes[(src + dst + m) % 6];
  };
  run_ranks(kRanks, loopback_options(GetParam()), [&](int rank, Transport& t) {
    for (int round = 0; round < 2; ++round) {
      std::vector<std::vector<std::uint8_t>> outs, ins;
      std::vector<std::pair<int, std::size_t>> in_tags;
      std::vector<RequestId> ids;
      outs.reserve(kRanks * kMessages);
      ins.reserve(kRanks * kMessages);
      // Sends first on even ranks and receives first on odd ones, so both the eager path and
      // frames arriving before their receive are exercised.
      for (int phase = 0; phase < 2; ++phase) {
        const bool sending = (phase == 0) == (rank % 2 == 0);
        for (int peer = 0; peer < kRanks; ++peer) {
          if (peer == rank) continue;
          for (std::size_t m = 0; m < kMessages; ++m) {
            if (sending) {
              outs.emplace_back(size_of(rank, peer, m));
              fill_pattern(outs.back(), rank, peer, m + round);
              auto id = t.send(peer, outs.back().data(), outs.back().size());
              ASSERT_TRUE(id.ok()) << id.status().to_string();
              ids.push_back(*id);
            } else {
              ins.emplace_back(size_of(peer, rank, m));
              in_tags.emplace_back(peer, m);
              auto id = t.recv(peer, ins.back().data(), ins.back().size());
              ASSERT_TRUE(id.ok()) << id.status().to_string();
              ids.push_back(*id);
            }
          }
        }
      }
      const Status s = t.wait(ids, test_deadline());
      ASSERT_TRUE(s.ok()) << "rank " << rank << ": " << s.to_string();
      for (std::size_t i = 0; i < ins.size(); ++i) {
        const auto [peer, m] = in_tags[i];
        EXPECT_EQ(pattern_mismatch(ins[i], peer, rank, m + round), -1)
            << "rank " << rank << " message " << m << " from " << peer;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(SocketsPerPeer, TcpSocketsTest, ::testing::Values(1, 3));

TEST_P(TcpSocketsTest, LengthMismatchFailsTheReceiveNamingPeerAndLengthsAndTheStreamGoesOn) {
  run_ranks(2, loopback_options(GetParam()), [&](int rank, Transport& t) {
    std::vector<std::uint8_t> big(100000, 7), small(10);
    if (rank == 0) {
      fill_pattern(small, 0, 1, 1);
      auto a = t.send(1, big.data(), big.size());
      auto b = t.send(1, small.data(), small.size());
      ASSERT_TRUE(a.ok() && b.ok());
      const RequestId ids[] = {*a, *b};
      EXPECT_TRUE(t.wait(ids, test_deadline()).ok());
    } else {
      std::vector<std::uint8_t> wrong(50000), next(10);
      auto a = t.recv(0, wrong.data(), wrong.size());
      ASSERT_TRUE(a.ok());
      const Status s = wait_one(t, *a, test_deadline());
      EXPECT_EQ(s.code(), StatusCode::kProtocolError) << s.to_string();
      EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("100000"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("50000"), std::string::npos) << s.message();
      auto b = t.recv(0, next.data(), next.size());
      ASSERT_TRUE(b.ok());
      EXPECT_TRUE(wait_one(t, *b, test_deadline()).ok());
      EXPECT_EQ(pattern_mismatch(next, 0, 1, 1), -1);
    }
  });
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

namespace hoop::testing {
namespace {

// Two simulated hosts of two ranks: only the pairs across hosts are connected over TCP, and a
// send to a rank of one's own host is refused rather than queued forever.
TEST_F(TcpTest, APeerListConnectsOnlyThosePairs) {
  constexpr int kRanks = 4;
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      tcp::TcpOptions o = loopback_options();
      o.peers = r < 2 ? std::vector<int>{2, 3} : std::vector<int>{0, 1};
      auto t = connect(r, kRanks, o);
      ASSERT_TRUE(t.ok()) << "rank " << r << ": " << t.status().to_string();
      Transport& tr = **t;
      const int same_host = r ^ 1;
      std::uint8_t byte = 0;
      auto refused = tr.send(same_host, &byte, 1);
      ASSERT_FALSE(refused.ok());
      EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(refused.status().message().find("no tcp connection"), std::string::npos)
          << refused.status().to_string();
      // Each rank exchanges one message with both ranks of the other host.
      std::vector<std::uint8_t> out(1000), in0(1000), in1(1000);
      fill_pattern(out, r, 0, 0);
      const int a = r < 2 ? 2 : 0;
      std::vector<RequestId> ids;
      ids.push_back(*tr.recv(a, in0.data(), in0.size()));
      ids.push_back(*tr.recv(a + 1, in1.data(), in1.size()));
      ids.push_back(*tr.send(a, out.data(), out.size()));
      ids.push_back(*tr.send(a + 1, out.data(), out.size()));
      const Status st = tr.wait(ids, test_deadline());
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(pattern_mismatch(in0, a, 0, 0), -1);
      EXPECT_EQ(pattern_mismatch(in1, a + 1, 0, 0), -1);
    });
  }
  for (auto& t : threads) t.join();
}

TEST_F(TcpTest, APeerListOutOfOrderIsRefused) {
  tcp::TcpOptions o = loopback_options();
  o.peers = {2, 1};
  auto t = connect(0, 3, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("ascending"), std::string::npos) << t.status().to_string();
}

}  // namespace
}  // namespace hoop::testing
