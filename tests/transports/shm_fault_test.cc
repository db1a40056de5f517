// The shared-memory transport's own fault: a rank killed during set-up leaves its segment
// named, and remove_job_segments (which hooprun calls when a job ends) sweeps it. The faults
// every transport shares are in fault_test.cc.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <thread>

#include "tests/transports/process_ranks.h"
#include "tests/transports/shm_test_util.h"

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

TEST(ShmProcessTest, RankKilledDuringSetUpLeavesASegmentThatRemoveJobSegmentsSweeps) {
  ProcessRanks ranks;
  const std::uint16_t port = ranks.start_store();
  ASSERT_NE(port, 0);
  const std::string job_id = unique_shm_job_id();
  // Rank 0 of a 2-rank job waits for a rank 1 that never comes, with its segment still named.
  ranks.start(1, [&](int, int out) {
    auto store = Store::connect("127.0.0.1", port, test_store_options(), 0);
    if (!store.ok()) report_status(out, store.status());
    shm::ShmOptions o = shm_test_options();
    o.connect_timeout = milliseconds{60000};
    auto t = shm::connect(**store, 0, 2, other_ranks(0, 2), job_id, o);
    report(out, "connected without its peer");
  });
  const Deadline deadline = test_deadline();
  while (job_segments(job_id).empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds{10});
  }
  ASSERT_EQ(job_segments(job_id).size(), 1u);
  ASSERT_EQ(::kill(ranks.child(0).pid, SIGKILL), 0);
  ::waitpid(ranks.child(0).pid, nullptr, 0);
  EXPECT_EQ(job_segments(job_id).size(), 1u);
  EXPECT_EQ(shm::remove_job_segments(job_id), 1);
  EXPECT_TRUE(job_segments(job_id).empty());
}

}  // namespace
}  // namespace hoop::testing
