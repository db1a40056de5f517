// The doorbell between two processes where publishers go without a fence (publish_fence) and a
// sleeper runs membarrier before its last look (sleep_fence): no publication is missed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "core/cpu_relax.h"
#include "tests/transports/tcp_test_util.h"
#include "transports/shm/shm_peers.h"
#include "transports/shm/shm_segment.h"

namespace hoop {
namespace {

constexpr std::uint64_t kRounds = 100000;

TEST(ShmDoorbell, ASleeperNeverMissesAPublicationMadeWithoutAFence) {
  const std::string name = "/hoop-doorbell-test-" + std::to_string(::getpid());
  const int senders[] = {1};
  auto seg = shm::Segment::create(name, 0, senders, 1, shm::kMinRingBytes);
  ASSERT_TRUE(seg.ok()) << seg.status().to_string();
  ::shm_unlink(name.c_str());
  if (!shm::uses_sleeper_barrier()) GTEST_SKIP() << "membarrier is refused here: publishers fence";
  shm::SegmentHeader& h = *seg->header();
  ASSERT_EQ(h.sleeper_barrier, 1u);
  // The ring's head counts the child's publications, its tail the rounds this process opened.
  shm::RingControl& ring = *seg->ring_of(1);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A forked child starts unregistered; a rank registers when it makes its own segment.
    if (!shm::register_sleeper_barrier()) ::_exit(3);
    for (std::uint64_t i = 1; i <= kRounds; ++i) {
      for (std::uint64_t spins = 1; ring.tail.load(std::memory_order_acquire) < i; ++spins) {
        if (spins % (1u << 20) == 0 && ::getppid() != parent) ::_exit(4);
        cpu_relax();
      }
      ring.head.store(i, std::memory_order_release);
      shm::ring_doorbell(h);
    }
    ::_exit(0);
  }
  // Each round: open it, then doze at once, so that the child publishes while this process
  // raises its sleeping count, runs its barrier and looks a last time. A publication that the
  // doze missed shows as a doze that slept until its timeout and found the round published.
  // (A doze may also end early without a ring: a wake-up the child sent in the round before.)
  // A child that stops or dies fails the test at the deadline instead of hanging it.
  constexpr auto kNap = std::chrono::seconds(1);
  const Deadline deadline = testing::test_deadline();
  std::uint64_t missed = 0;
  bool late = false;
  for (std::uint64_t i = 1; i <= kRounds && missed == 0 && !late; ++i) {
    ring.tail.store(i, std::memory_order_release);
    auto published = [&] { return ring.head.load(std::memory_order_acquire) >= i; };
    while (!published() && !late) {
      const auto start = Clock::now();
      const bool rang = shm::doze(
          h, std::chrono::duration_cast<std::chrono::microseconds>(kNap).count(), published);
      if (!rang && Clock::now() - start >= kNap && published()) ++missed;
      late = Clock::now() >= deadline;
    }
  }
  if (missed > 0 || late) ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_FALSE(late) << "the child stopped publishing (status " << status << ")";
  ASSERT_EQ(missed, 0u) << "a publication was missed";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

}  // namespace
}  // namespace hoop
