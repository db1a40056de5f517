// Binomial trees rooted at any rank, for broadcast, reduce, gather, scatter and barrier.
//
// Ranks are renumbered relative to the root, v = (rank - root) mod n. Relative rank v > 0 hangs
// under v with its lowest set bit cleared; its children are v + 2^k for every 2^k below its
// lowest set bit (every 2^k < n for the root) that is still < n. The subtree of v is the
// contiguous run of relative ranks [v, v + subtree_size), which is what gather and scatter
// need to pack one message per child. Depth and root fan-out are ceil(log2 n).
#pragma once

#include <vector>

namespace hoop::patterns {

/// The binomial tree over `size` ranks rooted at `root`.
class BinomialTree {
 public:
  /// The tree over `size` (>= 1) ranks rooted at `root` (in [0, size)).
  BinomialTree(int size, int root);

  /// The number of ranks.
  int size() const { return size_; }
  /// The root rank.
  int root() const { return root_; }
  /// `rank`'s number relative to the root (the root is 0).
  int relative(int rank) const;
  /// The rank whose relative number is `relative`.
  int rank_of(int relative) const;
  /// The rank `rank` receives from in a broadcast (sends to in a reduce), or -1 for the root.
  int parent(int rank) const;
  /// `rank`'s children in broadcast send order: farthest (in relative rank) first, whose subtree
  /// is the deepest, so a broadcast that sends one message per step finishes in ceil(log2 n)
  /// steps. A reduce receives from them in the reverse order, nearest first, as the shallowest
  /// subtrees complete first.
  std::vector<int> children(int rank) const;
  /// The number of ranks in `rank`'s subtree, itself included.
  int subtree_size(int rank) const;

 private:
  int size_;
  int root_;
};

}  // namespace hoop::patterns
