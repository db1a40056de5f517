// The TCP transport's data path between threads of one process, each its own rank: message
// sizes, ordering under many requests in flight, striping, length mismatches, orderly
// shutdown, deadlines, abort propagation and interface choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
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

TEST_P(TcpSocketsTest, EmptyMessagesInARowComplete) {
  run_ranks(4, loopback_options(GetParam()),
            [](int rank, Transport& t) { empty_messages_in_a_row(rank, 4, t); });
}

INSTANTIATE_TEST_SUITE_P(SocketsPerPeer, TcpSocketsTest, ::testing::Values(1, 3));

TEST_P(TcpSocketsTest, LengthMismatchFailsTheReceiveNamingPeerAndLengthsAndTheStreamGoesOn) {
  run_ranks(2, loopback_options(GetParam()), length_mismatch_then_stream_goes_on);
}

TEST_F(TcpTest, LargeMessageSentLongBeforeItsReceiveIsBufferedThenDelivered) {
  tcp::TcpOptions o = loopback_options();
  o.socket_buffer_bytes = 256 << 10;  // so the 40 MiB message overruns the unexpected buffer
  run_ranks(2, o, big_message_long_before_its_receive);
}

// A frame whose bytes were read into the staging buffer just as the unexpected frames before
// it filled the pause limit, and whose sender has since sent everything: once a receive takes
// those frames, the staged bytes must be delivered, since no more bytes will arrive on the
// socket to wake the reader (a 4-rank gather of large blocks over tcp stalled on this until its
// deadline).
TEST_F(TcpTest, BytesStagedWhenTheReaderPausedAreDeliveredOnceItResumes) {
  tcp::TcpOptions o = loopback_options();
  o.socket_buffer_bytes = 256 << 10;  // the pause limit is 4 x max(this, 1 MiB) = 4 MiB
  constexpr std::size_t kFill = std::size_t{4} << 20, kTail = 1024;
  for (int round = 0; round < 3; ++round) {
    o.key_prefix = "staged-" + std::to_string(round);  // a mesh of its own each round
    std::atomic<int> senders_done{0};
    std::atomic<bool> receiver_done{false};
    // Ranks 1 and 2 send to rank 0, which waits for both at once, as a gather's root does
    // (waiting on one peer alone reads that socket directly, which hid the stall).
    run_ranks(3, o, [&](int rank, Transport& t) {
      if (rank != 0) {
        std::vector<char> fill(kFill, static_cast<char>('a' + rank)), tail(kTail, 't');
        auto a = t.send(0, fill.data(), fill.size());
        auto b = t.send(0, tail.data(), tail.size());
        ASSERT_TRUE(a.ok() && b.ok());
        const RequestId both[] = {*a, *b};
        ASSERT_TRUE(t.wait(both, test_deadline()).ok());
        ++senders_done;
        // Alive and quiet until the receiver is done: a transport that shuts down sends a
        // goodbye, and those bytes would wake the reader.
        while (!receiver_done) t.poll(std::chrono::milliseconds(5));
        return;
      }
      // Read ahead without a receive until the senders are done: everything lands unexpected.
      while (senders_done < 2) t.poll(std::chrono::milliseconds(5));
      for (int i = 0; i < 20; ++i) t.poll(std::chrono::milliseconds(1));
      std::vector<std::vector<char>> got(4);
      std::vector<RequestId> ids;
      for (int peer = 1; peer <= 2; ++peer) {
        for (std::size_t bytes : {kFill, kTail}) {
          std::vector<char>& buf = got[ids.size()];
          buf.assign(bytes, 0);
          auto id = t.recv(peer, buf.data(), bytes);
          ASSERT_TRUE(id.ok());
          ids.push_back(*id);
        }
      }
      const Status s = t.wait(ids, Clock::now() + std::chrono::seconds(5));
      receiver_done = true;
      ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.to_string();
      for (int peer = 1; peer <= 2; ++peer) {
        const std::size_t k = static_cast<std::size_t>(peer - 1) * 2;
        EXPECT_EQ(got[k], std::vector<char>(kFill, static_cast<char>('a' + peer)));
        EXPECT_EQ(got[k + 1], std::vector<char>(kTail, 't'));
      }
    });
  }
}

// A read call stops after a fixed number of reads (so that one busy peer cannot starve the
// others). Here its last read takes exactly the rest of what two frames put on the wire, the
// end of one and all of the next, into the staging buffer, leaving the socket empty: those
// bytes must still be delivered, since nothing more will arrive to wake the reader.
TEST_F(TcpTest, WhatTheLastReadOfACallStagedIsDelivered) {
  tcp::TcpOptions o = loopback_options();
  o.socket_buffer_bytes = 2 << 20;  // the senders finish before rank 0 reads a byte
  // 64 reads of the 64 KiB staging buffer take both frames (16-byte headers) to the last byte.
  constexpr std::size_t kWire = std::size_t{64} * (64 << 10), kSecond = 1024;
  constexpr std::size_t kFirst = kWire - 2 * 16 - kSecond;
  for (int round = 0; round < 3; ++round) {
    o.key_prefix = "last-read-" + std::to_string(round);
    std::atomic<int> senders_done{0};
    std::atomic<bool> receiver_done{false};
    run_ranks(3, o, [&](int rank, Transport& t) {
      if (rank != 0) {
        std::vector<char> first(kFirst, static_cast<char>('a' + rank)), second(kSecond, 's');
        auto a = t.send(0, first.data(), first.size());
        auto b = t.send(0, second.data(), second.size());
        ASSERT_TRUE(a.ok() && b.ok());
        const RequestId both[] = {*a, *b};
        ASSERT_TRUE(t.wait(both, test_deadline()).ok());
        ++senders_done;
        while (!receiver_done) t.poll(std::chrono::milliseconds(5));
        return;
      }
      while (senders_done < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      t.poll(std::chrono::milliseconds(100));  // one read call per socket, no receive posted
      std::vector<std::vector<char>> got;
      std::vector<RequestId> ids;
      got.reserve(4);
      for (int peer = 1; peer <= 2; ++peer) {
        for (std::size_t bytes : {kFirst, kSecond}) {
          got.emplace_back(bytes, 0);
          auto id = t.recv(peer, got.back().data(), bytes);
          ASSERT_TRUE(id.ok());
          ids.push_back(*id);
        }
      }
      const Status s = t.wait(ids, Clock::now() + std::chrono::seconds(5));
      receiver_done = true;
      ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.to_string();
      EXPECT_EQ(got[0], std::vector<char>(kFirst, 'b'));
      EXPECT_EQ(got[1], std::vector<char>(kSecond, 's'));
      EXPECT_EQ(got[2], std::vector<char>(kFirst, 'c'));
      EXPECT_EQ(got[3], std::vector<char>(kSecond, 's'));
    });
  }
}

TEST_F(TcpTest, TestPollsWithoutBlockingAndConsumes) {
  run_ranks(2, loopback_options(), test_polls_without_blocking_and_consumes);
}

TEST_F(TcpTest, BadArgumentsAreRefused) {
  run_ranks(2, loopback_options(), [&](int rank, Transport& t) {
    bad_arguments_are_refused(rank, t);
    EXPECT_EQ(t.name(), "tcp");
    EXPECT_EQ(t.size(), 2);
  });
}

TEST_F(TcpTest, OrderlyShutdownDeliversEverythingSentThenFailsLaterReceives) {
  run_ranks(2, loopback_options(), orderly_shutdown_then_later_receives_fail);
}

TEST_F(TcpTest, WaitDeadlineNamesThePeerAndTheCauseReachesIt) {
  run_ranks(2, loopback_options(), wait_deadline_names_the_peer_and_aborts);
}

TEST_F(TcpTest, AbortCarriesTheCauseToEveryPeer) {
  run_ranks(3, loopback_options(), abort_carries_the_cause_to_every_peer);
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
