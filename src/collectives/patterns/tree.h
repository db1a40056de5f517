// Binary trees for latency-bound reductions and broadcasts, and NCCL's double binary tree.
//
// Both trees are in-order ("binary search") trees over a line of positions, so every edge joins
// ranks whose numbers are close and the depth is about log2(n):
//   tree 0: rank 0 is the root and has one child; ranks 1..n-1 form the in-order tree over
//           positions 1..n-1, whose root is the highest power of two <= n-1.
//   tree 1: the same construction shifted down by one rank: rank r sits at position r+1 of the
//           in-order tree over positions 1..n, with no extra root.
// In an in-order tree over positions 1..m the interior nodes are exactly the even positions, so
// tree 0's interior ranks are the even ones and tree 1's the odd ones: the interiors are disjoint
// and every rank is a leaf in at least one tree, for every n >= 2. Each rank thus forwards data
// in one tree only and the two trees together use every rank's send and receive bandwidth once.
// (NCCL's mirror-or-shift loses this property for odd n, where rank 0 is interior twice.)
//
// The data is split into two halves with Partition(count, 2): tree t carries half t.
#pragma once

#include <array>
#include <cstddef>

#include "collectives/patterns/partition.h"

namespace hoop::patterns {

/// One rank's neighbours in one tree. Reduce: receive from every child, send to the parent.
/// Broadcast: receive from the parent, send to every child, in the order listed.
struct TreeLinks {
  int parent = -1;                      // -1 for the root
  std::array<int, 2> children{-1, -1};  // the used entries first, -1 after them

  /// How many children the rank has (0, 1 or 2).
  int num_children() const { return (children[0] >= 0 ? 1 : 0) + (children[1] >= 0 ? 1 : 0); }
  /// Whether the rank has no child.
  bool is_leaf() const { return children[0] < 0; }
  /// Links are equal when parent and children are.
  friend bool operator==(const TreeLinks&, const TreeLinks&) = default;
};

/// The single binary tree (tree 0 of the double tree): rank 0 is the root; also the fallback when
/// only one tree is wanted.
TreeLinks binary_tree_links(int rank, int size);

/// NCCL-style double binary tree over `size` ranks; see the file comment for the shapes.
class DoubleBinaryTree {
 public:
  static constexpr int kTrees = 2;

  /// The two trees over `size` (>= 1) ranks.
  explicit DoubleBinaryTree(int size);

  /// The number of ranks.
  int size() const { return size_; }
  /// The root rank of tree `tree` (0 or 1).
  int root(int tree) const;
  /// The neighbours of `rank` in tree `tree`.
  TreeLinks links(int rank, int tree) const;
  /// The part of a `count`-element buffer that travels on tree `tree`.
  static Range half(std::size_t count, int tree) { return Partition(count, kTrees).chunk(tree); }

 private:
  int size_;
};

}  // namespace hoop::patterns
