// One rank of the CUDA IPC transport's tests, launched as a process of its own by
// cuda_transport_test.cc (CUDA IPC works between processes only): each GoogleTest case connects
// a fresh transport on device 0 and runs one shared body of transport_conformance.h on it,
// with host buffers staged through device memory (cuda_staging.h). The rank, the job size, the
// store's port and the job id come from HOOP_CUDA_CHECK_{RANK,SIZE,PORT,JOB}.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "tests/transports/cuda_staging.h"
#include "tests/transports/transport_conformance.h"
#include "transports/cuda/cuda_transport.h"

namespace hoop::testing {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? -1 : std::atoi(v);
}

/// Connects this rank and runs `body(rank, size, transport)` on it.
template <typename Body>
void run_body(Body body, std::size_t slice_bytes = std::size_t{1} << 20) {
  const int rank = env_int("HOOP_CUDA_CHECK_RANK"), size = env_int("HOOP_CUDA_CHECK_SIZE");
  ASSERT_GE(rank, 0) << "not launched by cuda_transport_test";
  auto store =
      Store::connect("127.0.0.1", static_cast<std::uint16_t>(env_int("HOOP_CUDA_CHECK_PORT")),
                     test_store_options(), rank);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  cuda::CudaOptions o;
  o.slice_bytes = slice_bytes;
  o.slots = 4;
  o.connect_timeout = std::chrono::seconds(30);
  // One job, one store, many cases: each case meets under keys of its own, or a rank would
  // read the rings a peer published for the case before (freed since).
  o.key_prefix = std::string("hoop/cuda/") +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::vector<int> peers;
  for (int r = 0; r < size; ++r)
    if (r != rank) peers.push_back(r);
  auto t = cuda::connect(**store, rank, size, peers, std::getenv("HOOP_CUDA_CHECK_JOB"), 0, o);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  DeviceStaged staged(std::move(t).value(), 0);
  body(rank, size, staged);
}

TEST(CudaRank, PingPongOfEverySizeArrivesIntact) {
  run_body([](int rank, int, Transport& t) { ping_pong_every_size(rank, t); });
}

// 4 KiB slices: every large message wraps the ring many times.
TEST(CudaRank, PingPongInSmallSlices) {
  run_body([](int rank, int, Transport& t) { ping_pong_sizes_up_to(rank, t, (1 << 20) + 3); },
           4096);
}

TEST(CudaRank, AllPairsWithManyMessagesInFlightKeepOrder) {
  run_body([](int rank, int size, Transport& t) { all_pairs_keep_order(rank, size, t, 20); },
           65536);
}

TEST(CudaRank, LengthMismatchFailsTheReceiveAndTheStreamGoesOn) {
  run_body([](int rank, int, Transport& t) { length_mismatch_then_stream_goes_on(rank, t); },
           16384);
}

TEST(CudaRank, LargeMessageSentLongBeforeItsReceive) {
  run_body([](int rank, int, Transport& t) { big_message_long_before_its_receive(rank, t); });
}

TEST(CudaRank, TestPollsWithoutBlockingAndConsumes) {
  run_body([](int rank, int, Transport& t) { test_polls_without_blocking_and_consumes(rank, t); });
}

TEST(CudaRank, BadArgumentsAreRefused) {
  run_body([](int rank, int, Transport& t) {
    bad_arguments_are_refused(rank, t);
    EXPECT_TRUE(t.accepts_device_memory());
    EXPECT_EQ(t.name(), "cuda");
  });
}

TEST(CudaRank, OrderlyShutdownThenLaterReceivesFail) {
  run_body([](int rank, int, Transport& t) { orderly_shutdown_then_later_receives_fail(rank, t); });
}

TEST(CudaRank, WaitDeadlineNamesThePeerAndAborts) {
  run_body([](int rank, int, Transport& t) { wait_deadline_names_the_peer_and_aborts(rank, t); });
}

TEST(CudaRank, AbortCarriesTheCauseToEveryPeer) {
  run_body([](int rank, int, Transport& t) { abort_carries_the_cause_to_every_peer(rank, t); });
}

// Of 3 ranks, rank 2 sends rank 0 one message and is killed; ranks 0 and 1, waiting on it,
// fail with peer_lost naming rank 2 and its pid (rank 0 first gets the message, unless rank 1's
// abort overtakes it).
TEST(CudaRank, KilledPeerIsNamedByTheSurvivors) {
  run_body([](int rank, int, Transport& t) {
    int v = 0;
    if (rank == 2) {
      v = 9;
      auto id = t.send(0, &v, sizeof v);
      ASSERT_TRUE(id.ok());
      ASSERT_TRUE(wait_one(t, *id, test_deadline()).ok());
      ::kill(::getpid(), SIGKILL);
    }
    if (rank == 0) {
      auto first = t.recv(2, &v, sizeof v);
      ASSERT_TRUE(first.ok()) << first.status().to_string();
      // Rank 2's message is in the ring before it dies; but when rank 1 sees the death first,
      // its abort, which names rank 2, may reach this rank before the message does and fail
      // the receive with that cause (an abort fails every pending request).
      const Status got = wait_one(t, *first, test_deadline());
      if (got.ok()) {
        EXPECT_EQ(v, 9);
      } else {
        EXPECT_EQ(got.code(), StatusCode::kPeerLost) << got.to_string();
        EXPECT_NE(got.message().find("rank 2 (pid "), std::string::npos) << got.message();
      }
    }
    auto id = t.recv(2, &v, sizeof v);
    const Status s = id.ok() ? wait_one(t, *id, test_deadline()) : id.status();
    EXPECT_EQ(s.code(), StatusCode::kPeerLost) << s.to_string();
    EXPECT_NE(s.message().find("rank 2 (pid "), std::string::npos) << s.message();
  });
}

}  // namespace
}  // namespace hoop::testing
