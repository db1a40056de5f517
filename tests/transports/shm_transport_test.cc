// The shared-memory transport's data path between threads of one process, each its own rank:
// message sizes (beyond the ring's), ordering under many requests in flight, length
// mismatches, orderly shutdown, deadlines, abort propagation, poll/wake, peers outside the
// mesh, segment clean-up and options.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <barrier>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "tests/transports/shm_test_util.h"
#include "tests/transports/transport_conformance.h"

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

// Ring sizes: the smallest allowed (every large message wraps many times) and the default;
// each with every message through the rings (read_bytes 0) and with the exchanges' sends
// (send_lent) by single copy from 4 KiB (these threads share one process, which can always
// read its own memory).
struct RingCase {
  std::size_t ring_bytes;
  std::size_t read_bytes;
};

class ShmRingTest : public ShmTest, public ::testing::WithParamInterface<RingCase> {
 protected:
  shm::ShmOptions options() const {
    shm::ShmOptions o = shm_test_options(GetParam().ring_bytes);
    o.read_bytes = GetParam().read_bytes;
    return o;
  }
};

TEST_P(ShmRingTest, PingPongOfEverySizeArrivesIntact) {
  run_shm_ranks(2, options(), ping_pong_every_size);
}

TEST_P(ShmRingTest, AllPairsWithManyMessagesInFlightKeepOrder) {
  const bool lend = GetParam().read_bytes > 0;
  run_shm_ranks(5, options(),
                [lend](int rank, Transport& t) { all_pairs_keep_order(rank, 5, t, 40, lend); });
}

TEST_P(ShmRingTest, LengthMismatchFailsTheReceiveNamingPeerAndLengthsAndTheStreamGoesOn) {
  run_shm_ranks(2, options(), length_mismatch_then_stream_goes_on);
}

TEST_P(ShmRingTest, EmptyMessagesInARowComplete) {
  run_shm_ranks(4, options(),
                [](int rank, Transport& t) { empty_messages_in_a_row(rank, 4, t); });
}

TEST_P(ShmRingTest, MessageBiggerThanTheRingSentLongBeforeItsReceive) {
  run_shm_ranks(2, options(), big_message_long_before_its_receive);
}

INSTANTIATE_TEST_SUITE_P(
    RingBytes, ShmRingTest,
    ::testing::Values(RingCase{64 << 10, 0}, RingCase{4 << 20, 0}, RingCase{64 << 10, 4096},
                      RingCase{4 << 20, 4096}),
    [](const ::testing::TestParamInfo<RingCase>& c) {
      const RingCase& r = c.param;
      return fmt::format("ring{}K_{}", r.ring_bytes >> 10,
                         r.read_bytes == 0 ? std::string("rings_only")
                                           : fmt::format("read_from{}", r.read_bytes));
    });

// A single-copy send (send_lent) completes only once its receiver has read it: until the
// receive is posted, the sender's buffer is lent, and what the sender writes afterwards (once
// the send completed) never reaches the receiver. Single-copy and ring messages keep their
// order, and a receive of the wrong length fails alone. A plain send() of the same size goes
// through the ring and completes at once.
TEST_F(ShmTest, LentSendsCompleteOnceReadKeepOrderAndFailOnlyTheMismatchedReceive) {
  shm::ShmOptions o = shm_test_options(64 << 10);
  o.read_bytes = 4096;
  run_shm_ranks(2, o, [](int rank, Transport& t) {
    std::vector<std::uint8_t> big(1 << 20), other(300000), small(10);
    int token = 0;
    if (rank == 0) {
      fill_pattern(big, 0, 1, 5);
      fill_pattern(other, 0, 1, 6);
      fill_pattern(small, 0, 1, 7);
      auto in = t.recv(1, &token, sizeof token);
      auto a = t.send_lent(1, big.data(), big.size());
      auto b = t.send_lent(1, other.data(), other.size());
      auto c = t.send_lent(1, small.data(), small.size());
      ASSERT_TRUE(in.ok() && a.ok() && b.ok() && c.ok());
      const Result<bool> done = t.test(*a);
      ASSERT_TRUE(done.ok()) << done.status().to_string();
      ASSERT_FALSE(*done) << "a lent send completed before its receive was posted";
      std::vector<std::uint8_t> eager(1 << 20, 3);
      auto e = t.send(1, eager.data(), eager.size());
      ASSERT_TRUE(e.ok());
      EXPECT_TRUE(wait_one(t, *e, test_deadline()).ok()) << "a plain send waited for its peer";
      const RequestId ids[] = {*in, *a, *b, *c};
      EXPECT_TRUE(t.wait(ids, test_deadline()).ok());
      std::fill(big.begin(), big.end(), std::uint8_t{0xee});
      EXPECT_EQ(token, 9);
      return;
    }
    std::this_thread::sleep_for(milliseconds{200});
    std::vector<std::uint8_t> wrong(299999);
    auto a = t.recv(0, big.data(), big.size());
    auto b = t.recv(0, wrong.data(), wrong.size());
    auto c = t.recv(0, small.data(), small.size());
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_TRUE(wait_one(t, *a, test_deadline()).ok());
    const Status s = wait_one(t, *b, test_deadline());
    EXPECT_EQ(s.code(), StatusCode::kProtocolError) << s.to_string();
    EXPECT_NE(s.message().find("300000"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("299999"), std::string::npos) << s.message();
    EXPECT_TRUE(wait_one(t, *c, test_deadline()).ok());
    std::vector<std::uint8_t> eager(1 << 20);
    auto e = t.recv(0, eager.data(), eager.size());
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE(wait_one(t, *e, test_deadline()).ok());
    EXPECT_EQ(eager[12345], 3);
    EXPECT_EQ(pattern_mismatch(big, 0, 1, 5), -1);
    EXPECT_EQ(pattern_mismatch(small, 0, 1, 7), -1);
    token = 9;
    auto back = t.send(0, &token, sizeof token);
    ASSERT_TRUE(back.ok());
    EXPECT_TRUE(wait_one(t, *back, test_deadline()).ok());
  });
}

TEST_F(ShmTest, HeldSendsGoOutWithTheNextOrAlone) {
  run_shm_ranks(2, shm_test_options(), held_sends_go_out);
}

TEST_F(ShmTest, AwaitedSendsArriveInOrder) {
  run_shm_ranks(2, shm_test_options(), awaited_sends_keep_order);
}

TEST_F(ShmTest, TestPollsWithoutBlockingAndConsumes) {
  run_shm_ranks(2, shm_test_options(), test_polls_without_blocking_and_consumes);
}

TEST_F(ShmTest, BadArgumentsAndRanksOutsideTheMeshAreRefused) {
  // Ranks 0 and 1 share a host; rank 2 of the job lives elsewhere.
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto tr = connect_shm(rank, 3, shm_test_options(), {1 - rank});
      ASSERT_TRUE(tr.ok()) << tr.status().to_string();
      Transport& t = **tr;
      bad_arguments_are_refused(rank, t);
      char c = 0;
      const Status outside = t.send(2, &c, 1).status();
      EXPECT_EQ(outside.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(outside.message().find("rank 2"), std::string::npos) << outside.message();
      EXPECT_EQ(t.recv(2, &c, 1).status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(t.name(), "shm");
      EXPECT_FALSE(t.accepts_device_memory());
      EXPECT_EQ(t.size(), 3);
    });
  }
  for (auto& th : threads) th.join();
}

TEST_F(ShmTest, OrderlyShutdownDeliversEverythingSentThenFailsLaterReceives) {
  run_shm_ranks(2, shm_test_options(), orderly_shutdown_then_later_receives_fail);
}

TEST_F(ShmTest, WaitDeadlineNamesThePeerAndTheCauseReachesIt) {
  run_shm_ranks(2, shm_test_options(), wait_deadline_names_the_peer_and_aborts);
}

TEST_F(ShmTest, AbortCarriesTheCauseToEveryPeer) {
  run_shm_ranks(3, shm_test_options(), abort_carries_the_cause_to_every_peer);
}

TEST_F(ShmTest, WakeFromAnotherThreadEndsAPollAndAMessageEndsOneToo) {
  run_shm_ranks(2, shm_test_options(), [&](int rank, Transport& t) {
    int v = 0;
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds{200});
      v = 5;
      auto id = t.send(0, &v, sizeof v);
      ASSERT_TRUE(id.ok());
      EXPECT_TRUE(wait_one(t, *id, test_deadline()).ok());
      return;
    }
    // A poll that would sleep a minute ends once another thread calls wake().
    auto polled = std::async(std::launch::async, [&] { t.poll(std::chrono::seconds{60}); });
    std::this_thread::sleep_for(milliseconds{50});
    t.wake();
    EXPECT_EQ(polled.wait_for(std::chrono::seconds{20}), std::future_status::ready);
    polled.get();
    // A wake() with no poll in progress ends the next one.
    t.wake();
    t.poll(std::chrono::seconds{60});
    // A message arriving ends a poll and the poll moves its bytes.
    auto id = t.recv(1, &v, sizeof v);
    ASSERT_TRUE(id.ok());
    const Deadline deadline = test_deadline();
    while (v != 5 && Clock::now() < deadline) t.poll(std::chrono::seconds{60});
    EXPECT_EQ(v, 5);
    EXPECT_TRUE(wait_one(t, *id, test_deadline()).ok());
  });
}

TEST_F(ShmTest, SegmentsAreUnlinkedOnceConnected) {
  std::barrier connected(3);
  run_shm_ranks(3, shm_test_options(), [&](int rank, Transport& t) {
    // Each rank unlinks its own name once its peers have mapped it; by the time all three are
    // connected, every name is gone while the transports work on.
    connected.arrive_and_wait();
    EXPECT_TRUE(job_segments(job_id_).empty()) << "rank " << rank;
    int v = rank;
    auto a = t.send((rank + 1) % 3, &v, sizeof v);
    int got = -1;
    auto b = t.recv((rank + 2) % 3, &got, sizeof got);
    ASSERT_TRUE(a.ok() && b.ok());
    const RequestId ids[] = {*a, *b};
    EXPECT_TRUE(t.wait(ids, test_deadline()).ok());
    EXPECT_EQ(got, (rank + 2) % 3);
  });
  EXPECT_TRUE(job_segments(job_id_).empty());
}

TEST_F(ShmTest, ConnectTimeoutNamesTheMissingRankAndLeavesNothing) {
  shm::ShmOptions o = shm_test_options();
  o.connect_timeout = milliseconds{500};
  auto t = connect_shm(0, 3, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kTimeout) << t.status().to_string();
  EXPECT_NE(t.status().message().find("1, 2"), std::string::npos) << t.status().message();
  EXPECT_TRUE(job_segments(job_id_).empty());
}

TEST_F(ShmTest, RemoveJobSegmentsRemovesLeftovers) {
  const std::string other_job = unique_shm_job_id();
  for (const std::string& job : {job_id_, job_id_, other_job}) {
    static int n = 0;
    const std::string name = "/" + shm::segment_prefix(job) + "mesh-" + std::to_string(n++);
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << name;
    ::close(fd);
  }
  EXPECT_EQ(job_segments(job_id_).size(), 2u);
  EXPECT_EQ(shm::remove_job_segments(job_id_), 2);
  EXPECT_TRUE(job_segments(job_id_).empty());
  EXPECT_EQ(job_segments(other_job).size(), 1u);
  EXPECT_EQ(shm::remove_job_segments(other_job), 1);
}

TEST_F(ShmTest, BadArgumentsToConnectAreRefused) {
  auto s = store(0);
  ASSERT_NE(s, nullptr);
  const shm::ShmOptions o = shm_test_options();
  const std::vector<std::vector<int>> bad_peers = {{0}, {3}, {1, 1}, {-1}};
  for (const auto& peers : bad_peers) {
    EXPECT_EQ(shm::connect(*s, 0, 3, peers, job_id_, o).status().code(),
              StatusCode::kInvalidArgument);
  }
  shm::ShmOptions tiny = o;
  tiny.ring_bytes = 4096;
  EXPECT_EQ(shm::connect(*s, 0, 2, std::vector<int>{1}, job_id_, tiny).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(shm::connect(*s, 0, 2, std::vector<int>{1}, "a/b", o).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(job_segments(job_id_).empty());
}

TEST(ShmOptionsTest, ReadFromTheEnvironment) {
  ::unsetenv("HOOP_SHM_RING_BYTES");
  ::unsetenv("HOOP_SHM_READ_BYTES");
  ::unsetenv("HOOP_SPIN_US");
  ::unsetenv("HOOP_START_TIMEOUT");
  auto defaults = shm::shm_options_from_env();
  ASSERT_TRUE(defaults.ok()) << defaults.status().to_string();
  EXPECT_EQ(defaults->ring_bytes, std::size_t{4} << 20);
  // Unset: measured when the transport connects.
  EXPECT_FALSE(defaults->read_bytes.has_value());
  const bool slow = shm::cross_memory_reads_slow();
  EXPECT_EQ(shm::cross_memory_reads_slow(), slow);  // measured once per process
  EXPECT_EQ(shm::default_read_bytes(false), slow ? shm::kLendSlowFromBytes : shm::kLendFromBytes);
  EXPECT_EQ(shm::default_read_bytes(true),
            slow ? shm::kLendSlowCrowdedFromBytes : shm::kLendFromBytes);
  EXPECT_EQ(defaults->spin, std::chrono::microseconds(200));
  EXPECT_EQ(defaults->connect_timeout, milliseconds(30000));
  ::setenv("HOOP_SHM_RING_BYTES", "8M", 1);
  ::setenv("HOOP_SHM_READ_BYTES", "0", 1);
  ::setenv("HOOP_SPIN_US", "7", 1);
  ::setenv("HOOP_START_TIMEOUT", "2.5", 1);
  auto set = shm::shm_options_from_env();
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->ring_bytes, std::size_t{8} << 20);
  EXPECT_EQ(set->read_bytes, std::optional<std::size_t>(0));
  EXPECT_EQ(set->spin, std::chrono::microseconds(7));
  EXPECT_EQ(set->connect_timeout, milliseconds(2500));
  for (const char* bad : {"32K", "lots", "-1"}) {
    SCOPED_TRACE(bad);
    ::setenv("HOOP_SHM_RING_BYTES", bad, 1);
    auto r = shm::shm_options_from_env();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("HOOP_SHM_RING_BYTES"), std::string::npos)
        << r.status().message();
  }
  ::unsetenv("HOOP_SHM_RING_BYTES");
  ::unsetenv("HOOP_SHM_READ_BYTES");
  ::unsetenv("HOOP_SPIN_US");
  ::unsetenv("HOOP_START_TIMEOUT");
}

}  // namespace
}  // namespace hoop::testing
