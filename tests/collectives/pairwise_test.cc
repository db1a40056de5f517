// Pairwise alltoall schedules: every step pairs each send with the matching receive, no rank
// hears from two senders in one step, and every (source, destination) block moves exactly once.
#include "collectives/patterns/pairwise.h"

#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <vector>

#include "simulation.h"

namespace hoop::patterns {
namespace {

class PairwiseTest : public ::testing::TestWithParam<int> {};

TEST_P(PairwiseTest, EveryBlockMovesOnce) {
  const int n = GetParam();
  std::vector<PairwiseSchedule> schedules{PairwiseSchedule::kShift};
  if (std::has_single_bit(static_cast<unsigned>(n))) schedules.push_back(PairwiseSchedule::kXor);
  for (PairwiseSchedule schedule : schedules) {
    SCOPED_TRACE(schedule == PairwiseSchedule::kXor ? "xor" : "shift");
    const auto un = static_cast<std::size_t>(n);
    std::vector<int> delivered(un * un, 0);  // [src * n + dst]
    for (int s = 1; s < n; ++s) {
      std::vector<int> senders_to(un, 0);
      for (int r = 0; r < n; ++r) {
        const PairwiseStep st = pairwise_step(r, n, s, schedule);
        ASSERT_NE(st.send_to, r);
        ASSERT_NE(st.recv_from, r);
        // Whoever r sends to expects r at this very step.
        ASSERT_EQ(pairwise_step(st.send_to, n, s, schedule).recv_from, r) << "step " << s;
        ++senders_to[static_cast<std::size_t>(st.send_to)];
        ++delivered[static_cast<std::size_t>(r) * un + static_cast<std::size_t>(st.send_to)];
      }
      for (int c : senders_to) ASSERT_EQ(c, 1) << "step " << s;
    }
    for (int src = 0; src < n; ++src) {
      for (int dst = 0; dst < n; ++dst) {
        const auto i = static_cast<std::size_t>(src) * un + static_cast<std::size_t>(dst);
        ASSERT_EQ(delivered[i], src == dst ? 0 : 1) << src << " -> " << dst;
      }
    }
  }
  EXPECT_EQ(default_pairwise_schedule(n), std::has_single_bit(static_cast<unsigned>(n))
                                              ? PairwiseSchedule::kXor
                                              : PairwiseSchedule::kShift);
}

INSTANTIATE_TEST_SUITE_P(Sizes, PairwiseTest, ::testing::ValuesIn(testing::simulated_sizes()),
                         testing::size_name);

TEST(Pairwise, KnownSteps) {
  EXPECT_EQ(pairwise_step(1, 5, 2, PairwiseSchedule::kShift), (PairwiseStep{3, 4}));
  EXPECT_EQ(pairwise_step(5, 8, 3, PairwiseSchedule::kXor), (PairwiseStep{6, 6}));
}

}  // namespace
}  // namespace hoop::patterns
