// Ring schedules simulated for every size, order, count and slice size: reduce-scatter leaves
// each rank's chunk fully reduced on that rank, allgather spreads every chunk to every rank, and
// the chain broadcast reaches every rank once.
#include "collectives/patterns/ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "collectives/patterns/partition.h"
#include "simulation.h"

namespace hoop::patterns {
namespace {

using testing::all_ranks;
using testing::only;
using testing::OpKind;
using testing::Simulation;

// The orders each size is simulated with: identity, reversed, and a fixed shuffle.
std::vector<Ring> rings_for(int n) {
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<Ring> rings{Ring(n)};
  std::vector<int> reversed(order.rbegin(), order.rend());
  rings.push_back(Ring::from_order(reversed).value());
  std::mt19937 rng(static_cast<unsigned>(n) * 7919u + 1u);
  std::shuffle(order.begin(), order.end(), rng);
  rings.push_back(Ring::from_order(order).value());
  return rings;
}

std::string describe(const Ring& ring, std::size_t count, std::size_t max_slice) {
  std::string s =
      "count " + std::to_string(count) + " slice " + std::to_string(max_slice) + " order";
  for (int r : ring.order()) s += " " + std::to_string(r);
  return s;
}

// Runs one phase (reduce-scatter when `reduce`, else allgather) of `ring` in `sim`.
void run_phase(const Ring& ring, const Partition& part, std::size_t max_slice, bool reduce,
               Simulation& sim) {
  for (int s = 0; s < ring.steps(); ++s) {
    auto ops = sim.new_step();
    for (int r = 0; r < ring.size(); ++r) {
      const RingStep st = reduce ? ring.reduce_scatter_step(r, s) : ring.allgather_step(r, s);
      auto& mine = ops[static_cast<std::size_t>(r)];
      testing::add_sliced(mine, OpKind::kSend, ring.right(r), part.chunk(st.send_chunk), max_slice);
      testing::add_sliced(mine, reduce ? OpKind::kRecvReduce : OpKind::kRecvCopy, ring.left(r),
                          part.chunk(st.recv_chunk), max_slice);
    }
    ASSERT_EQ(sim.step(ops), "") << "step " << s;
  }
}

class RingSimulation : public ::testing::TestWithParam<int> {};

TEST_P(RingSimulation, AllreduceIsReduceScatterThenAllgather) {
  const int n = GetParam();
  for (const Ring& ring : rings_for(n)) {
    for (std::size_t count : testing::simulated_counts(n)) {
      const Partition part(count, n);
      // Slicing does not interact with the order, so only the identity ring runs every slice size.
      std::vector<std::size_t> slices{~std::size_t{0}};
      if (ring.order() == rings_for(n).front().order()) slices = testing::simulated_slices(count);
      for (std::size_t max_slice : slices) {
        SCOPED_TRACE(describe(ring, count, max_slice));
        Simulation sim(n, count);
        for (int r = 0; r < n; ++r) sim.buffer(r).set(Range{0, count}, only(r));

        run_phase(ring, part, max_slice, /*reduce=*/true, sim);
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(sim.buffer(r).holds(part.chunk(Ring::owned_chunk(r)), all_ranks(n)))
              << "rank " << r << " does not own its reduced chunk";
          // Bandwidth optimality: every chunk but the own one leaves each rank exactly once.
          ASSERT_EQ(sim.sent(r), count - part.chunk(r).length) << "rank " << r;
        }
        run_phase(ring, part, max_slice, /*reduce=*/false, sim);
        ASSERT_EQ(sim.duplicates(), 0);
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(sim.buffer(r).holds(Range{0, count}, all_ranks(n))) << "rank " << r;
          // Allgather forwards every chunk but the right neighbour's, which it receives last.
          ASSERT_EQ(sim.sent(r),
                    2 * count - part.chunk(r).length - part.chunk(ring.right(r)).length)
              << "rank " << r;
        }
      }
    }
  }
}

TEST_P(RingSimulation, AllgatherDeliversEveryChunkEverywhere) {
  const int n = GetParam();
  for (const Ring& ring : rings_for(n)) {
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n) + 1, std::size_t{1023}}) {
      const Partition part(count, n);
      SCOPED_TRACE(describe(ring, count, 3));
      Simulation sim(n, count);
      for (int r = 0; r < n; ++r) sim.buffer(r).set(part.chunk(Ring::owned_chunk(r)), only(r));
      run_phase(ring, part, 3, /*reduce=*/false, sim);
      for (int r = 0; r < n; ++r) {
        for (int c = 0; c < n; ++c) {
          ASSERT_TRUE(sim.buffer(r).holds(part.chunk(c), only(c)))
              << "rank " << r << " chunk " << c;
        }
      }
    }
  }
}

// Broadcast as a pipeline along the ring: the rank d hops from the root forwards slice t - d at
// step t, so all links carry a slice at once once the pipeline is full.
TEST_P(RingSimulation, ChainBroadcastReachesEveryRankOnce) {
  const int n = GetParam();
  for (const Ring& ring : rings_for(n)) {
    for (int root : {0, n - 1}) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1023}}) {
        for (std::size_t max_slice : {std::size_t{3}, std::size_t{100}, ~std::size_t{0}}) {
          SCOPED_TRACE(describe(ring, count, max_slice) + " root " + std::to_string(root));
          const auto slices = static_cast<int>(slice_count(Range{0, count}, max_slice));
          Simulation sim(n, count);
          sim.buffer(root).set(Range{0, count}, only(root));
          std::vector<int> hops(static_cast<std::size_t>(n), -1);
          int chain_length = 0;
          for (int r = root; r != -1; r = ring.chain_next(r, root)) {
            ASSERT_LT(chain_length, n) << "chain does not end";
            hops[static_cast<std::size_t>(r)] = chain_length++;
            if (r != root) {
              ASSERT_EQ(ring.chain_next(ring.chain_prev(r, root), root), r);
            }
          }
          ASSERT_EQ(chain_length, n);
          std::vector<int> received(static_cast<std::size_t>(n) * static_cast<std::size_t>(slices));
          for (int t = 0; t + 1 < slices + n; ++t) {
            auto ops = sim.new_step();
            for (int r = 0; r < n; ++r) {
              const int d = hops[static_cast<std::size_t>(r)];
              auto& mine = ops[static_cast<std::size_t>(r)];
              const int out = t - d;
              const int next = ring.chain_next(r, root);
              if (next != -1 && out >= 0 && out < slices) {
                mine.push_back({OpKind::kSend, next,
                                slice(Range{0, count}, max_slice, static_cast<std::size_t>(out))});
              }
              const int in = t - (d - 1);
              if (d > 0 && in >= 0 && in < slices) {
                mine.push_back({OpKind::kRecvCopy, ring.chain_prev(r, root),
                                slice(Range{0, count}, max_slice, static_cast<std::size_t>(in))});
                ++received[static_cast<std::size_t>(r * slices + in)];
              }
            }
            ASSERT_EQ(sim.step(ops), "") << "step " << t;
          }
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(sim.buffer(r).holds(Range{0, count}, only(root))) << "rank " << r;
            for (int i = 0; i < slices; ++i) {
              ASSERT_EQ(received[static_cast<std::size_t>(r * slices + i)], r == root ? 0 : 1);
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, RingSimulation, ::testing::Range(1, 65), testing::size_name);

TEST(Ring, NeighboursFollowTheOrder) {
  const Ring ring = Ring::from_order({2, 0, 3, 1}).value();
  EXPECT_EQ(ring.right(2), 0);
  EXPECT_EQ(ring.right(1), 2);
  EXPECT_EQ(ring.left(2), 1);
  EXPECT_EQ(ring.left(3), 0);
  EXPECT_EQ(ring.position(3), 2);
  EXPECT_EQ(ring.rank_at(-1), 1);
  EXPECT_EQ(ring.rank_at(5), 0);
}

TEST(Ring, PipelinedStepsForwardWhatWasJustReduced) {
  for (int n = 2; n <= 9; ++n) {
    for (const Ring& ring : rings_for(n)) {
      for (int r = 0; r < n; ++r) {
        for (int s = 0; s + 1 < ring.steps(); ++s) {
          EXPECT_EQ(ring.reduce_scatter_step(r, s + 1).send_chunk,
                    ring.reduce_scatter_step(r, s).recv_chunk);
          EXPECT_EQ(ring.allgather_step(r, s + 1).send_chunk, ring.allgather_step(r, s).recv_chunk);
        }
        // What the left neighbour sends is what this rank receives, in both phases.
        for (int s = 0; s < ring.steps(); ++s) {
          EXPECT_EQ(ring.reduce_scatter_step(ring.left(r), s).send_chunk,
                    ring.reduce_scatter_step(r, s).recv_chunk);
          EXPECT_EQ(ring.allgather_step(ring.left(r), s).send_chunk,
                    ring.allgather_step(r, s).recv_chunk);
        }
        EXPECT_EQ(ring.allgather_step(r, 0).send_chunk, Ring::owned_chunk(r));
      }
    }
  }
}

TEST(Ring, SingleRankHasNoSteps) {
  const Ring ring(1);
  EXPECT_EQ(ring.steps(), 0);
  EXPECT_EQ(ring.left(0), 0);
  EXPECT_EQ(ring.right(0), 0);
  EXPECT_EQ(ring.chain_prev(0, 0), -1);
  EXPECT_EQ(ring.chain_next(0, 0), -1);
}

TEST(Ring, RejectsOrdersThatAreNotPermutations) {
  EXPECT_EQ(Ring::from_order({}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::from_order({0, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::from_order({0, 2}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Ring::from_order({-1, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Ring::from_order({1, 0}).ok());
}

}  // namespace
}  // namespace hoop::patterns
