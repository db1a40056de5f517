// One rank of the MPI transport's conformance tests, launched by mpirun (see
// mpi_transport_test.cc): each GoogleTest case connects a fresh MPI transport across the
// job and runs one shared body of transport_conformance.h on it. Run it with
// --gtest_filter=MpiRank.<Case> and the job size the case needs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "tests/transports/transport_conformance.h"
#include "transports/mpi/mpi_transport.h"

namespace hoop::testing {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? -1 : std::atoi(v);
}

/// Connects this rank over MPI with `chunk_bytes`-byte chunks and runs `body` on it.
template <typename Body>
void run_body(Body body, std::size_t chunk_bytes = std::size_t{1} << 30) {
  const int rank = env_int("OMPI_COMM_WORLD_RANK"), size = env_int("OMPI_COMM_WORLD_SIZE");
  ASSERT_GE(rank, 0) << "not launched by mpirun";
  mpi::MpiOptions o;
  o.chunk_bytes = chunk_bytes;
  o.connect_timeout = std::chrono::seconds(30);
  auto t = mpi::connect(rank, size, o);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  body(rank, size, **t);
}

TEST(MpiRank, PingPongOfEverySizeArrivesIntact) {
  run_body([](int rank, int, Transport& t) { ping_pong_every_size(rank, t); });
}

// 4 KiB chunks: a 4096-byte message is exactly one chunk and the 1 MiB + 3 one travels as 257,
// as a message over INT_MAX bytes would travel in 1 GiB chunks (the 64 MiB one is left out:
// the test above moves it, and in chunks it only costs time).
TEST(MpiRank, PingPongInSmallChunks) {
  run_body([](int rank, int, Transport& t) { ping_pong_sizes_up_to(rank, t, (1 << 20) + 3); },
           4096);
}

// Under mpirun the transport says it is usable, and names the MPI library.
TEST(MpiRank, UsableUnderMpirun) {
  std::string why;
  EXPECT_TRUE(mpi::mpi_usable(&why)) << why;
  EXPECT_NE(mpi::mpi_library_version().find("MPI"), std::string::npos)
      << mpi::mpi_library_version();
}

TEST(MpiRank, AllPairsWithManyMessagesInFlightKeepOrder) {
  run_body([](int rank, int size, Transport& t) { all_pairs_keep_order(rank, size, t, 40); },
           65536);
}

TEST(MpiRank, LengthMismatchFailsTheReceiveAndTheStreamGoesOn) {
  run_body([](int rank, int, Transport& t) { length_mismatch_then_stream_goes_on(rank, t); },
           30000);
}

TEST(MpiRank, LargeMessageSentLongBeforeItsReceive) {
  run_body([](int rank, int, Transport& t) { big_message_long_before_its_receive(rank, t); });
}

TEST(MpiRank, TestPollsWithoutBlockingAndConsumes) {
  run_body([](int rank, int, Transport& t) { test_polls_without_blocking_and_consumes(rank, t); });
}

TEST(MpiRank, BadArgumentsAreRefused) {
  run_body([](int rank, int, Transport& t) { bad_arguments_are_refused(rank, t); });
}

TEST(MpiRank, OrderlyShutdownThenLaterReceivesFail) {
  run_body([](int rank, int, Transport& t) { orderly_shutdown_then_later_receives_fail(rank, t); });
}

TEST(MpiRank, WaitDeadlineNamesThePeerAndAborts) {
  run_body([](int rank, int, Transport& t) { wait_deadline_names_the_peer_and_aborts(rank, t); });
}

TEST(MpiRank, AbortCarriesTheCauseToEveryPeer) {
  run_body([](int rank, int, Transport& t) { abort_carries_the_cause_to_every_peer(rank, t); });
}

// poll() returns early on wake() and when a message arrives.
TEST(MpiRank, PollEndsOnWakeAndOnArrival) {
  run_body([](int rank, int, Transport& t) {
    const auto start = Clock::now();
    t.wake();
    t.poll(std::chrono::seconds(10));
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
    int v = 5;
    auto id = rank == 0 ? t.send(1, &v, sizeof v) : t.recv(0, &v, sizeof v);
    ASSERT_TRUE(id.ok());
    EXPECT_TRUE(wait_one(t, *id, test_deadline()).ok());
  });
}

}  // namespace
}  // namespace hoop::testing
