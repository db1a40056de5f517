// Binomial trees from every root: consistent links, contiguous subtrees (what gather and scatter
// pack), a broadcast in the documented send order that reaches every rank once in ceil(log2 n)
// steps, and a reduce that brings every contribution to the root once.
#include "collectives/patterns/binomial.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "simulation.h"

namespace hoop::patterns {
namespace {

using testing::all_ranks;
using testing::only;
using testing::OpKind;
using testing::Simulation;

int ceil_log2(int n) { return static_cast<int>(std::bit_width(static_cast<unsigned>(n - 1))); }

std::vector<int> roots_for(int n) {
  std::vector<int> roots{0, n / 3, n / 2, n - 1};
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  return roots;
}

// Collects the relative ranks of `rank`'s subtree by walking the children.
void collect_subtree(const BinomialTree& tree, int rank, std::vector<int>& out) {
  out.push_back(tree.relative(rank));
  for (int c : tree.children(rank)) collect_subtree(tree, c, out);
}

class BinomialSimulation : public ::testing::TestWithParam<int> {};

TEST_P(BinomialSimulation, LinksAgreeAndSubtreesAreContiguous) {
  const int n = GetParam();
  for (int root = 0; root < n; ++root) {
    const BinomialTree tree(n, root);
    EXPECT_EQ(tree.parent(root), -1);
    EXPECT_EQ(tree.subtree_size(root), n);
    EXPECT_EQ(static_cast<int>(tree.children(root).size()), ceil_log2(n));
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(tree.rank_of(tree.relative(r)), r);
      for (int c : tree.children(r)) EXPECT_EQ(tree.parent(c), r) << "root " << root;
      if (r != root) {
        const auto siblings = tree.children(tree.parent(r));
        EXPECT_EQ(std::count(siblings.begin(), siblings.end(), r), 1) << "root " << root;
      }
      std::vector<int> sub;
      collect_subtree(tree, r, sub);
      std::sort(sub.begin(), sub.end());
      ASSERT_EQ(static_cast<int>(sub.size()), tree.subtree_size(r)) << "root " << root;
      for (std::size_t i = 0; i < sub.size(); ++i) {
        ASSERT_EQ(sub[i], tree.relative(r) + static_cast<int>(i)) << "not contiguous";
      }
      // Broadcast order: farthest child first.
      const auto children = tree.children(r);
      for (std::size_t i = 1; i < children.size(); ++i) {
        EXPECT_GT(tree.relative(children[i - 1]), tree.relative(children[i]));
      }
    }
  }
}

TEST_P(BinomialSimulation, BroadcastReachesEveryRankOnceInLogSteps) {
  const int n = GetParam();
  for (int root : roots_for(n)) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1023}}) {
      SCOPED_TRACE("root " + std::to_string(root) + " count " + std::to_string(count));
      const BinomialTree tree(n, root);
      Simulation sim(n, count);
      sim.buffer(root).set(Range{0, count}, only(root));
      // A rank that got the data at step t sends to its i-th child at step t + 1 + i.
      std::vector<int> got_at(static_cast<std::size_t>(n), -2);
      got_at[static_cast<std::size_t>(root)] = -1;
      std::vector<int> receipts(static_cast<std::size_t>(n), 0);
      for (int step = 0; step < n; ++step) {
        auto ops = sim.new_step();
        for (int r = 0; r < n; ++r) {
          const int t = got_at[static_cast<std::size_t>(r)];
          if (t == -2 || t >= step) continue;
          const auto children = tree.children(r);
          const int i = step - t - 1;
          if (i >= static_cast<int>(children.size())) continue;
          const int c = children[static_cast<std::size_t>(i)];
          ops[static_cast<std::size_t>(r)].push_back({OpKind::kSend, c, Range{0, count}});
          ops[static_cast<std::size_t>(c)].push_back({OpKind::kRecvCopy, r, Range{0, count}});
          ++receipts[static_cast<std::size_t>(c)];
          got_at[static_cast<std::size_t>(c)] = step;
        }
        ASSERT_EQ(sim.step(ops), "") << "step " << step;
      }
      int last = -1;
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(receipts[static_cast<std::size_t>(r)], r == root ? 0 : 1) << "rank " << r;
        ASSERT_TRUE(sim.buffer(r).holds(Range{0, count}, only(root))) << "rank " << r;
        last = std::max(last, got_at[static_cast<std::size_t>(r)]);
      }
      EXPECT_EQ(last + 1, ceil_log2(n)) << "largest-subtree-first order is not optimal";
    }
  }
}

TEST_P(BinomialSimulation, ReduceBringsEveryContributionToTheRootOnce) {
  const int n = GetParam();
  for (int root : roots_for(n)) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1023}}) {
      SCOPED_TRACE("root " + std::to_string(root) + " count " + std::to_string(count));
      const BinomialTree tree(n, root);
      Simulation sim(n, count);
      for (int r = 0; r < n; ++r) sim.buffer(r).set(Range{0, count}, only(r));
      // A rank sends up once all its children have: at step ceil(log2(subtree size)), which is
      // the height of its subtree, so children in reverse broadcast order arrive first.
      for (int step = 0; step < ceil_log2(n); ++step) {
        auto ops = sim.new_step();
        for (int r = 0; r < n; ++r) {
          if (r == root || ceil_log2(tree.subtree_size(r)) != step) continue;
          const int p = tree.parent(r);
          ops[static_cast<std::size_t>(r)].push_back({OpKind::kSend, p, Range{0, count}});
          ops[static_cast<std::size_t>(p)].push_back({OpKind::kRecvReduce, r, Range{0, count}});
        }
        ASSERT_EQ(sim.step(ops), "") << "step " << step;
      }
      ASSERT_EQ(sim.duplicates(), 0);
      ASSERT_TRUE(sim.buffer(root).holds(Range{0, count}, all_ranks(n)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, BinomialSimulation, ::testing::ValuesIn(testing::simulated_sizes()),
                         testing::size_name);

TEST(BinomialTree, KnownShape) {
  // n = 6 rooted at 2: relative ranks 0..5 are ranks 2, 3, 4, 5, 0, 1.
  const BinomialTree tree(6, 2);
  EXPECT_EQ(tree.children(2), (std::vector<int>{0, 4, 3}));
  EXPECT_EQ(tree.children(0), (std::vector<int>{1}));
  EXPECT_EQ(tree.children(4), (std::vector<int>{5}));
  EXPECT_EQ(tree.parent(1), 0);
  EXPECT_EQ(tree.parent(5), 4);
  EXPECT_EQ(tree.subtree_size(0), 2);
  EXPECT_EQ(tree.subtree_size(4), 2);
  EXPECT_TRUE(BinomialTree(1, 0).children(0).empty());
}

}  // namespace
}  // namespace hoop::patterns
