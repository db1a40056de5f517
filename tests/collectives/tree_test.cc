// The double binary tree: both trees are spanning trees of depth about log2(n) with disjoint
// interiors, and a reduce followed by a broadcast on them (each tree carrying its half of the
// buffer, pipelined in slices) leaves every contribution on every rank exactly once.
#include "collectives/patterns/tree.h"

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

// Depth from the root and height above the deepest leaf of every rank of one tree.
struct Shape {
  std::vector<int> depth;
  std::vector<int> height;
};

// Checks that tree `t` of `tree` is a spanning tree rooted at root(t) whose parent and child
// links agree, and measures it.
Shape check_spanning(const DoubleBinaryTree& tree, int t) {
  const int n = tree.size();
  Shape shape{std::vector<int>(static_cast<std::size_t>(n), -1),
              std::vector<int>(static_cast<std::size_t>(n), 0)};
  for (int r = 0; r < n; ++r) {
    const TreeLinks links = tree.links(r, t);
    EXPECT_EQ(links.parent == -1, r == tree.root(t)) << "rank " << r << " tree " << t;
    if (links.children[0] < 0) {
      EXPECT_LT(links.children[1], 0) << "children not packed";
    }
    for (int i = 0; i < links.num_children(); ++i) {
      const int c = links.children[static_cast<std::size_t>(i)];
      EXPECT_TRUE(c >= 0 && c < n && c != r) << "rank " << r << " child " << c;
      if (c >= 0 && c < n) {
        EXPECT_EQ(tree.links(c, t).parent, r) << "child " << c;
      }
    }
    if (links.parent >= 0) {
      const TreeLinks up = tree.links(links.parent, t);
      EXPECT_TRUE(up.children[0] == r || up.children[1] == r) << "parent " << links.parent;
    }
    // Walking up must reach the root within n hops (no cycle, one component).
    int hops = 0;
    for (int x = r; x != tree.root(t) && hops <= n; x = tree.links(x, t).parent) ++hops;
    EXPECT_LE(hops, n - 1) << "rank " << r << " does not reach the root";
    shape.depth[static_cast<std::size_t>(r)] = hops;
  }
  for (int r = 0; r < n; ++r) {
    int h = 0;
    for (int x = r; x != tree.root(t); x = tree.links(x, t).parent) {
      ++h;
      auto& height = shape.height[static_cast<std::size_t>(tree.links(x, t).parent)];
      height = std::max(height, h);
    }
  }
  return shape;
}

std::vector<int> tree_sizes() {
  std::vector<int> sizes = testing::simulated_sizes();
  for (int n : {200, 255, 256, 257, 1000, 1023, 1024, 1025, 4097}) sizes.push_back(n);
  return sizes;
}

class DoubleTreeShape : public ::testing::TestWithParam<int> {};

TEST_P(DoubleTreeShape, SpanningShallowAndInteriorsDisjoint) {
  const int n = GetParam();
  const DoubleBinaryTree tree(n);
  const int depth_bound = static_cast<int>(std::bit_width(static_cast<unsigned>(n)));
  for (int t = 0; t < DoubleBinaryTree::kTrees; ++t) {
    const Shape shape = check_spanning(tree, t);
    const int depth = *std::max_element(shape.depth.begin(), shape.depth.end());
    EXPECT_LE(depth, depth_bound) << "tree " << t;
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(n == 1 || tree.links(r, 0).is_leaf() || tree.links(r, 1).is_leaf())
        << "rank " << r << " is interior in both trees";
  }
  EXPECT_EQ(binary_tree_links(n - 1, n), tree.links(n - 1, 0));
}

INSTANTIATE_TEST_SUITE_P(Sizes, DoubleTreeShape, ::testing::ValuesIn(tree_sizes()),
                         testing::size_name);

class DoubleTreeSimulation : public ::testing::TestWithParam<int> {};

TEST_P(DoubleTreeSimulation, ReduceThenBroadcastDeliversEveryContributionOnce) {
  const int n = GetParam();
  const DoubleBinaryTree tree(n);
  std::vector<Shape> shapes;
  for (int t = 0; t < DoubleBinaryTree::kTrees; ++t) shapes.push_back(check_spanning(tree, t));
  int rounds = 0;
  for (const Shape& s : shapes) {
    rounds = std::max(rounds, *std::max_element(s.height.begin(), s.height.end()));
  }
  for (std::size_t count : testing::simulated_counts(n)) {
    for (std::size_t max_slice : testing::simulated_slices(count)) {
      SCOPED_TRACE("count " + std::to_string(count) + " slice " + std::to_string(max_slice));
      Simulation sim(n, count);
      for (int r = 0; r < n; ++r) sim.buffer(r).set(Range{0, count}, only(r));
      // Reduce: a rank sends up in the round after its last child's data arrived. Both trees run
      // in the same rounds; every rank posts tree 0's messages before tree 1's.
      for (int round = 0; round < rounds; ++round) {
        auto ops = sim.new_step();
        for (int t = 0; t < DoubleBinaryTree::kTrees; ++t) {
          const Range half = DoubleBinaryTree::half(count, t);
          for (int r = 0; r < n; ++r) {
            const int parent = tree.links(r, t).parent;
            if (parent < 0 ||
                shapes[static_cast<std::size_t>(t)].height[static_cast<std::size_t>(r)] != round)
              continue;
            testing::add_sliced(ops[static_cast<std::size_t>(r)], OpKind::kSend, parent, half,
                                max_slice);
            testing::add_sliced(ops[static_cast<std::size_t>(parent)], OpKind::kRecvReduce, r, half,
                                max_slice);
          }
        }
        ASSERT_EQ(sim.step(ops), "") << "reduce round " << round;
      }
      for (int t = 0; t < DoubleBinaryTree::kTrees; ++t) {
        ASSERT_TRUE(sim.buffer(tree.root(t)).holds(DoubleBinaryTree::half(count, t), all_ranks(n)))
            << "root of tree " << t;
      }
      // Broadcast: the ranks at depth d forward in round d.
      for (int round = 0; round < n; ++round) {
        auto ops = sim.new_step();
        bool any = false;
        for (int t = 0; t < DoubleBinaryTree::kTrees; ++t) {
          const Range half = DoubleBinaryTree::half(count, t);
          for (int r = 0; r < n; ++r) {
            if (shapes[static_cast<std::size_t>(t)].depth[static_cast<std::size_t>(r)] != round)
              continue;
            const TreeLinks links = tree.links(r, t);
            for (int i = 0; i < links.num_children(); ++i) {
              const int c = links.children[static_cast<std::size_t>(i)];
              testing::add_sliced(ops[static_cast<std::size_t>(r)], OpKind::kSend, c, half,
                                  max_slice);
              testing::add_sliced(ops[static_cast<std::size_t>(c)], OpKind::kRecvCopy, r, half,
                                  max_slice);
              any = true;
            }
          }
        }
        if (!any) break;
        ASSERT_EQ(sim.step(ops), "") << "broadcast round " << round;
      }
      ASSERT_EQ(sim.duplicates(), 0);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(sim.buffer(r).holds(Range{0, count}, all_ranks(n))) << "rank " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, DoubleTreeSimulation,
                         ::testing::ValuesIn(testing::simulated_sizes()), testing::size_name);

TEST(DoubleBinaryTree, KnownShapes) {
  // n = 8: tree 0 is 0 -> 4 -> {2, 6}, 2 -> {1, 3}, 6 -> {5, 7}; tree 1 is its shift by one.
  const DoubleBinaryTree tree(8);
  EXPECT_EQ(tree.links(0, 0), (TreeLinks{-1, {4, -1}}));
  EXPECT_EQ(tree.links(4, 0), (TreeLinks{0, {2, 6}}));
  EXPECT_EQ(tree.links(6, 0), (TreeLinks{4, {5, 7}}));
  EXPECT_EQ(tree.links(7, 0), (TreeLinks{6, {-1, -1}}));
  EXPECT_EQ(tree.root(1), 7);
  EXPECT_EQ(tree.links(7, 1), (TreeLinks{-1, {3, -1}}));
  EXPECT_EQ(tree.links(3, 1), (TreeLinks{7, {1, 5}}));
  EXPECT_EQ(tree.links(1, 1), (TreeLinks{3, {0, 2}}));
  // n = 2: each tree is one edge, in opposite directions.
  const DoubleBinaryTree two(2);
  EXPECT_EQ(two.links(1, 0).parent, 0);
  EXPECT_EQ(two.links(0, 1).parent, 1);
  // n = 1: a lone root in both trees.
  const DoubleBinaryTree one(1);
  EXPECT_EQ(one.links(0, 0), TreeLinks{});
  EXPECT_EQ(one.links(0, 1), TreeLinks{});
}

TEST(DoubleBinaryTree, HalvesSplitTheBuffer) {
  EXPECT_EQ(DoubleBinaryTree::half(7, 0), (Range{0, 4}));
  EXPECT_EQ(DoubleBinaryTree::half(7, 1), (Range{4, 3}));
  EXPECT_EQ(DoubleBinaryTree::half(1, 1), (Range{1, 0}));
  EXPECT_EQ(DoubleBinaryTree::half(0, 0), (Range{0, 0}));
}

}  // namespace
}  // namespace hoop::patterns
