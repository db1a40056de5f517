// The simulation harness itself must catch the mistakes it exists to catch.
#include "simulation.h"

#include <gtest/gtest.h>

namespace hoop::patterns::testing {
namespace {

TEST(Simulation, AppliesSendsFromThePreStepState) {
  Simulation sim(2, 4);
  sim.buffer(0).set(Range{0, 4}, only(0));
  sim.buffer(1).set(Range{0, 4}, only(1));
  auto ops = sim.new_step();
  ops[0] = {{OpKind::kSend, 1, Range{0, 2}}, {OpKind::kRecvReduce, 1, Range{2, 2}}};
  ops[1] = {{OpKind::kRecvReduce, 0, Range{0, 2}}, {OpKind::kSend, 0, Range{2, 2}}};
  ASSERT_EQ(sim.step(ops), "");
  EXPECT_TRUE(sim.buffer(0).holds(Range{2, 2}, all_ranks(2)));
  EXPECT_TRUE(sim.buffer(0).holds(Range{0, 2}, only(0)));
  EXPECT_TRUE(sim.buffer(1).holds(Range{0, 2}, all_ranks(2)));
  EXPECT_EQ(sim.sent(0), 2u);
  EXPECT_EQ(sim.duplicates(), 0);
}

TEST(Simulation, RejectsMismatchedMessages) {
  Simulation sim(3, 10);
  auto missing_recv = sim.new_step();
  missing_recv[0] = {{OpKind::kSend, 1, Range{0, 2}}};
  EXPECT_NE(sim.step(missing_recv), "");
  auto wrong_range = sim.new_step();
  wrong_range[0] = {{OpKind::kSend, 1, Range{0, 2}}};
  wrong_range[1] = {{OpKind::kRecvCopy, 0, Range{0, 3}}};
  EXPECT_NE(sim.step(wrong_range), "");
  auto wrong_peer = sim.new_step();
  wrong_peer[0] = {{OpKind::kSend, 1, Range{0, 2}}};
  wrong_peer[2] = {{OpKind::kRecvCopy, 0, Range{0, 2}}};
  EXPECT_NE(sim.step(wrong_peer), "");
  auto swapped_order = sim.new_step();
  swapped_order[0] = {{OpKind::kSend, 1, Range{0, 2}}, {OpKind::kSend, 1, Range{2, 2}}};
  swapped_order[1] = {{OpKind::kRecvCopy, 0, Range{2, 2}}, {OpKind::kRecvCopy, 0, Range{0, 2}}};
  EXPECT_NE(sim.step(swapped_order), "");
  auto to_self = sim.new_step();
  to_self[0] = {{OpKind::kSend, 0, Range{0, 2}}, {OpKind::kRecvCopy, 0, Range{0, 2}}};
  EXPECT_NE(sim.step(to_self), "");
  auto past_end = sim.new_step();
  past_end[0] = {{OpKind::kSend, 1, Range{8, 3}}};
  past_end[1] = {{OpKind::kRecvCopy, 0, Range{8, 3}}};
  EXPECT_NE(sim.step(past_end), "");
}

TEST(Simulation, CountsDuplicateContributions) {
  Simulation sim(2, 6);
  sim.buffer(0).set(Range{0, 6}, only(0));
  sim.buffer(1).set(Range{0, 6}, all_ranks(2));
  auto ops = sim.new_step();
  ops[1] = {{OpKind::kSend, 0, Range{1, 3}}};
  ops[0] = {{OpKind::kRecvReduce, 1, Range{1, 3}}};
  ASSERT_EQ(sim.step(ops), "");
  EXPECT_GT(sim.duplicates(), 0);
  EXPECT_FALSE(sim.buffer(0).holds(Range{0, 6}, all_ranks(2)));
  EXPECT_TRUE(sim.buffer(0).holds(Range{1, 3}, all_ranks(2)));
}

}  // namespace
}  // namespace hoop::patterns::testing
