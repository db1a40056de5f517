// The TCP transport's data path between threads of one process, each its own rank: message
// sizes, ordering under many requests in flight, striping, length mismatches, orderly
// shutdown, deadlines, abort propagation and interface choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
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

TEST_P(TcpSocketsTest, HeldSendsGoOutWithTheNextOrAlone) {
  run_ranks(2, loopback_options(GetParam()), held_sends_go_out);
}

TEST_P(TcpSocketsTest, AwaitedSendsLeftInTheSocketArriveInOrder) {
  run_ranks(2, loopback_options(GetParam()), awaited_sends_keep_order);
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

/// Two frames (`first` bytes of 'a' + rank, then `second` of 's') from each of ranks 1 and 2 to
/// rank 0, which reads meanwhile (or not: `read_while_sending`), runs `read_ahead` once both
/// senders are done and then receives all four at
/// once, as a gather's root waits on several peers (a wait on one peer alone reads its socket
/// directly, which hides the stalls these tests are for). The senders stay alive and quiet
/// until rank 0 is done: a transport that shuts down sends a goodbye, whose bytes would wake
/// the reader. Three rounds, each over a mesh of its own.
class TcpStallTest : public TcpTest {
 protected:
  void two_frames_from_two_peers(tcp::TcpOptions o, const std::string& name, std::size_t first,
                                 std::size_t second, bool read_while_sending,
                                 const std::function<void(Transport&)>& read_ahead);
};

void TcpStallTest::two_frames_from_two_peers(tcp::TcpOptions o, const std::string& name,
                                             std::size_t first, std::size_t second,
                                             bool read_while_sending,
                                             const std::function<void(Transport&)>& read_ahead) {
  for (int round = 0; round < 3; ++round) {
    o.key_prefix = name + std::to_string(round);
    std::atomic<int> senders_done{0};
    std::atomic<bool> receiver_done{false};
    run_ranks(3, o, [&](int rank, Transport& t) {
      if (rank != 0) {
        std::vector<char> a(first, static_cast<char>('a' + rank)), b(second, 's');
        auto ida = t.send(0, a.data(), a.size());
        auto idb = t.send(0, b.data(), b.size());
        ASSERT_TRUE(ida.ok() && idb.ok());
        const RequestId both[] = {*ida, *idb};
        ASSERT_TRUE(t.wait(both, test_deadline()).ok());
        ++senders_done;
        while (!receiver_done) t.poll(std::chrono::milliseconds(5));
        return;
      }
      while (senders_done < 2) {
        if (read_while_sending) {
          t.poll(std::chrono::milliseconds(5));
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
      read_ahead(t);
      std::vector<std::vector<char>> got;
      std::vector<RequestId> ids;
      got.reserve(4);
      for (int peer = 1; peer <= 2; ++peer) {
        for (std::size_t bytes : {first, second}) {
          got.emplace_back(bytes, 0);
          auto id = t.recv(peer, got.back().data(), bytes);
          ASSERT_TRUE(id.ok());
          ids.push_back(*id);
        }
      }
      const Status s = t.wait(ids, Clock::now() + std::chrono::seconds(5));
      receiver_done = true;
      ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.to_string();
      EXPECT_EQ(got[0], std::vector<char>(first, 'b'));
      EXPECT_EQ(got[1], std::vector<char>(second, 's'));
      EXPECT_EQ(got[2], std::vector<char>(first, 'c'));
      EXPECT_EQ(got[3], std::vector<char>(second, 's'));
    });
  }
}

// The first frames fill the reader's limit of unexpected data just as the second's bytes reach
// its staging buffer, so it pauses with them there; once a receive takes the first frames and
// resumes it, the staged bytes must be delivered, since no more will arrive on the socket to
// wake the reader (a 4-rank gather of large blocks over tcp stalled to its deadline on this).
TEST_F(TcpStallTest, BytesStagedWhenTheReaderPausedAreDeliveredOnceItResumes) {
  tcp::TcpOptions o = loopback_options();
  o.socket_buffer_bytes = 256 << 10;  // the pause limit is 4 x max(this, 1 MiB) = 4 MiB
  two_frames_from_two_peers(o, "paused-", std::size_t{4} << 20, 1024, true, [](Transport& t) {
    for (int i = 0; i < 20; ++i) t.poll(std::chrono::milliseconds(1));
  });
}

// A read call stops after 64 reads (so that one busy peer cannot starve the others). Here its
// last read takes exactly the rest of both frames, the end of the first and all of the second,
// into the 64 KiB staging buffer, leaving the socket empty: those bytes must still be
// delivered, since nothing more will arrive to wake the reader.
TEST_F(TcpStallTest, WhatTheLastReadOfACallStagedIsDelivered) {
  tcp::TcpOptions o = loopback_options();
  o.socket_buffer_bytes = 2 << 20;  // the senders finish before rank 0 reads a byte
  constexpr std::size_t kWire = std::size_t{64} * (64 << 10), kSecond = 1024;
  two_frames_from_two_peers(o, "last-read-", kWire - 2 * 16 - kSecond, kSecond, false,
                            [](Transport& t) { t.poll(std::chrono::milliseconds(100)); });
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
