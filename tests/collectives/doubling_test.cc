// Recursive doubling and Rabenseifner, with the non-power-of-two fold, simulated for every size:
// allreduce leaves every contribution on every rank exactly once, Rabenseifner's reduce-scatter
// leaves each survivor's block fully reduced, and the power-of-two allgather gathers everything.
#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <vector>

#include "collectives/patterns/rabenseifner.h"
#include "collectives/patterns/recursive_doubling.h"
#include "simulation.h"

namespace hoop::patterns {
namespace {

using testing::all_ranks;
using testing::only;
using testing::OpKind;
using testing::Simulation;

// The fold's first step: every kFolded rank hands its whole buffer to its partner.
void fold_in(const Fold& fold, Range whole, Simulation& sim) {
  auto ops = sim.new_step();
  for (int r = 0; r < fold.size(); ++r) {
    if (fold.role(r) != FoldRole::kFolded) continue;
    ops[static_cast<std::size_t>(r)].push_back({OpKind::kSend, fold.partner(r), whole});
    ops[static_cast<std::size_t>(fold.partner(r))].push_back({OpKind::kRecvReduce, r, whole});
  }
  ASSERT_EQ(sim.step(ops), "");
}

// The fold's last step: every kFoldReceiver returns the result to its partner.
void fold_out(const Fold& fold, Range whole, Simulation& sim) {
  auto ops = sim.new_step();
  for (int r = 0; r < fold.size(); ++r) {
    if (fold.role(r) != FoldRole::kFoldReceiver) continue;
    ops[static_cast<std::size_t>(r)].push_back({OpKind::kSend, fold.partner(r), whole});
    ops[static_cast<std::size_t>(fold.partner(r))].push_back({OpKind::kRecvCopy, r, whole});
  }
  ASSERT_EQ(sim.step(ops), "");
}

class FoldTest : public ::testing::TestWithParam<int> {};

TEST_P(FoldTest, RolesAndNumberingAreConsistent) {
  const int n = GetParam();
  const Fold fold(n);
  const int p = fold.survivors();
  ASSERT_TRUE(std::has_single_bit(static_cast<unsigned>(p)));
  ASSERT_TRUE(p <= n && n < 2 * p);
  std::vector<int> seen(static_cast<std::size_t>(p), 0);
  int folded = 0;
  for (int r = 0; r < n; ++r) {
    const FoldRole role = fold.role(r);
    if (role == FoldRole::kFolded) {
      ++folded;
      EXPECT_EQ(fold.new_rank(r), -1);
      EXPECT_EQ(fold.role(fold.partner(r)), FoldRole::kFoldReceiver);
      EXPECT_EQ(fold.partner(fold.partner(r)), r);
      continue;
    }
    EXPECT_EQ(fold.partner(r) == -1, role == FoldRole::kSurvivor);
    const int nr = fold.new_rank(r);
    ASSERT_TRUE(nr >= 0 && nr < p);
    ++seen[static_cast<std::size_t>(nr)];
    EXPECT_EQ(fold.real_rank(nr), r);
  }
  EXPECT_EQ(folded, fold.folded());
  EXPECT_EQ(folded, n - p);
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST_P(FoldTest, RecursiveDoublingAllreduce) {
  const int n = GetParam();
  const RecursiveDoubling rd(n);
  const Fold& fold = rd.fold();
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1023}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    const Range whole{0, count};
    Simulation sim(n, count);
    for (int r = 0; r < n; ++r) sim.buffer(r).set(whole, only(r));
    fold_in(fold, whole, sim);
    for (int s = 0; s < rd.steps(); ++s) {
      auto ops = sim.new_step();
      for (int r = 0; r < n; ++r) {
        if (fold.role(r) == FoldRole::kFolded) continue;
        const int partner = rd.partner(r, s);
        ASSERT_EQ(rd.partner(partner, s), r) << "step " << s;
        ops[static_cast<std::size_t>(r)].push_back({OpKind::kSend, partner, whole});
        ops[static_cast<std::size_t>(r)].push_back({OpKind::kRecvReduce, partner, whole});
      }
      ASSERT_EQ(sim.step(ops), "") << "step " << s;
    }
    fold_out(fold, whole, sim);
    ASSERT_EQ(sim.duplicates(), 0);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(sim.buffer(r).holds(whole, all_ranks(n))) << "rank " << r;
    }
  }
}

TEST_P(FoldTest, RabenseifnerAllreduce) {
  const int n = GetParam();
  for (std::size_t count : testing::simulated_counts(n)) {
    SCOPED_TRACE("count " + std::to_string(count));
    const Rabenseifner rab(n, count);
    const Fold& fold = rab.fold();
    const int p = fold.survivors();
    Simulation sim(n, count);
    for (int r = 0; r < n; ++r) sim.buffer(r).set(rab.whole(), only(r));
    fold_in(fold, rab.whole(), sim);
    std::vector<std::size_t> sent_before(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) sent_before[static_cast<std::size_t>(r)] = sim.sent(r);

    for (int s = 0; s < rab.steps(); ++s) {
      auto ops = sim.new_step();
      for (int r = 0; r < n; ++r) {
        if (fold.role(r) == FoldRole::kFolded) continue;
        const HalvingStep st = rab.reduce_scatter_step(r, s);
        const HalvingStep theirs = rab.reduce_scatter_step(st.partner, s);
        ASSERT_EQ(theirs.partner, r);
        ASSERT_EQ(theirs.send, st.recv);
        ops[static_cast<std::size_t>(r)].push_back({OpKind::kSend, st.partner, st.send});
        ops[static_cast<std::size_t>(r)].push_back({OpKind::kRecvReduce, st.partner, st.recv});
      }
      ASSERT_EQ(sim.step(ops), "") << "reduce-scatter step " << s;
    }
    std::vector<int> owners(static_cast<std::size_t>(p), 0);
    for (int r = 0; r < n; ++r) {
      if (fold.role(r) == FoldRole::kFolded) continue;
      const Range mine = rab.owned(r);
      ASSERT_EQ(mine, rab.blocks().chunk(fold.new_rank(r)));
      ++owners[static_cast<std::size_t>(fold.new_rank(r))];
      ASSERT_TRUE(sim.buffer(r).holds(mine, all_ranks(n))) << "rank " << r;
      ASSERT_EQ(sim.sent(r) - sent_before[static_cast<std::size_t>(r)], count - mine.length);
    }
    for (int o : owners) ASSERT_EQ(o, 1);

    for (int s = 0; s < rab.steps(); ++s) {
      auto ops = sim.new_step();
      for (int r = 0; r < n; ++r) {
        if (fold.role(r) == FoldRole::kFolded) continue;
        const HalvingStep st = rab.allgather_step(r, s);
        // Allgather step s retraces reduce-scatter step steps()-1-s in reverse.
        const HalvingStep back = rab.reduce_scatter_step(r, rab.steps() - 1 - s);
        ASSERT_EQ(st.partner, back.partner);
        ASSERT_EQ(st.send, back.recv);
        ASSERT_EQ(st.recv, back.send);
        ops[static_cast<std::size_t>(r)].push_back({OpKind::kSend, st.partner, st.send});
        ops[static_cast<std::size_t>(r)].push_back({OpKind::kRecvCopy, st.partner, st.recv});
      }
      ASSERT_EQ(sim.step(ops), "") << "allgather step " << s;
    }
    fold_out(fold, rab.whole(), sim);
    ASSERT_EQ(sim.duplicates(), 0);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(sim.buffer(r).holds(rab.whole(), all_ranks(n))) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, FoldTest, ::testing::ValuesIn(testing::simulated_sizes()),
                         testing::size_name);

class PowerOfTwoTest : public ::testing::TestWithParam<int> {};

TEST_P(PowerOfTwoTest, RecursiveDoublingAllgather) {
  const int n = GetParam();
  const RecursiveDoubling rd(n);
  ASSERT_EQ(rd.fold().survivors(), n);
  for (std::size_t count : testing::simulated_counts(n)) {
    SCOPED_TRACE("count " + std::to_string(count));
    const Partition part(count, n);
    Simulation sim(n, count);
    for (int r = 0; r < n; ++r) sim.buffer(r).set(part.chunk(r), only(r));
    for (int s = 0; s < rd.steps(); ++s) {
      auto ops = sim.new_step();
      for (int r = 0; r < n; ++r) {
        const ChunkSpan out = RecursiveDoubling::allgather_send_chunks(r, s);
        const ChunkSpan in = RecursiveDoubling::allgather_recv_chunks(r, s);
        ASSERT_EQ(in, RecursiveDoubling::allgather_send_chunks(rd.partner(r, s), s));
        ops[static_cast<std::size_t>(r)].push_back(
            {OpKind::kSend, rd.partner(r, s), part.chunks(out.first, out.count)});
        ops[static_cast<std::size_t>(r)].push_back(
            {OpKind::kRecvCopy, rd.partner(r, s), part.chunks(in.first, in.count)});
      }
      ASSERT_EQ(sim.step(ops), "") << "step " << s;
    }
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) {
        ASSERT_TRUE(sim.buffer(r).holds(part.chunk(c), only(c))) << "rank " << r << " chunk " << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, PowerOfTwoTest, ::testing::Values(1, 2, 4, 8, 16, 32, 64, 128),
                         testing::size_name);

TEST(Fold, KnownNumbering) {
  // n = 6: p = 4, pairs (0,1) and (2,3); survivors 1, 3, 4, 5 are new ranks 0..3.
  const Fold fold(6);
  EXPECT_EQ(fold.survivors(), 4);
  EXPECT_EQ(fold.role(0), FoldRole::kFolded);
  EXPECT_EQ(fold.role(3), FoldRole::kFoldReceiver);
  EXPECT_EQ(fold.role(4), FoldRole::kSurvivor);
  EXPECT_EQ(fold.new_rank(3), 1);
  EXPECT_EQ(fold.new_rank(5), 3);
  EXPECT_EQ(RecursiveDoubling(6).partner(1, 1), 4);
  EXPECT_EQ(RecursiveDoubling(1).steps(), 0);
}

TEST(Rabenseifner, KnownSteps) {
  // n = 4, 10 elements: blocks [0,3) [3,6) [6,8) [8,10); rank 1 first keeps the low half.
  const Rabenseifner rab(4, 10);
  EXPECT_EQ(rab.reduce_scatter_step(1, 0), (HalvingStep{3, Range{5 + 1, 4}, Range{0, 6}}));
  EXPECT_EQ(rab.reduce_scatter_step(1, 1), (HalvingStep{0, Range{0, 3}, Range{3, 3}}));
  EXPECT_EQ(rab.owned(1), (Range{3, 3}));
  EXPECT_EQ(rab.allgather_step(1, 0), (HalvingStep{0, Range{3, 3}, Range{0, 3}}));
  EXPECT_EQ(rab.allgather_step(1, 1), (HalvingStep{3, Range{0, 6}, Range{6, 4}}));
}

}  // namespace
}  // namespace hoop::patterns
