#include "collectives/patterns/tree.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace hoop::patterns {
namespace {

// The implicit in-order tree over positions 1..m (m >= 1) is the complete one over 1..2^k-1
// clipped at m: position x with lowest set bit b has children x - b/2 and x + b/2 when b > 1.
// Clipping only removes right-hand parts, so a right child beyond m is replaced by the root of
// what is left of that subtree, (x, m], which is the node with the highest lowest-bit there.
struct InorderLinks {
  int parent = 0;  // 0 for the root; positions are 1-based
  int left = 0;    // 0 when absent
  int right = 0;
};

int lowest_bit(int x) { return x & -x; }

InorderLinks inorder_links(int x, int m) {
  assert(x >= 1 && x <= m);
  InorderLinks links;
  const int b = lowest_bit(x);
  if (b > 1) {
    links.left = x - b / 2;
    if (x < m) {
      links.right =
          x + std::min(b / 2, static_cast<int>(std::bit_floor(static_cast<unsigned>(m - x))));
    }
  }
  if (x == static_cast<int>(std::bit_floor(static_cast<unsigned>(m)))) return links;  // the root
  // In the complete tree x is the left child of x + b when bit 2b is clear, else the right child
  // of x - b. When x + b is clipped away, x is what replaced it as the right child of x - b.
  if ((x & (2 * b)) == 0 && x + b <= m) {
    links.parent = x + b;
  } else {
    links.parent = x - b;
  }
  return links;
}

// Converts in-order links to rank links, given rank = position - shift.
TreeLinks to_rank_links(const InorderLinks& in, int shift) {
  TreeLinks out;
  out.parent = in.parent == 0 ? -1 : in.parent - shift;
  int used = 0;
  if (in.left != 0) out.children[static_cast<std::size_t>(used++)] = in.left - shift;
  if (in.right != 0) out.children[static_cast<std::size_t>(used++)] = in.right - shift;
  return out;
}

}  // namespace

TreeLinks binary_tree_links(int rank, int size) {
  assert(size >= 1 && rank >= 0 && rank < size);
  if (size == 1) return TreeLinks{};
  const int inner_root = static_cast<int>(std::bit_floor(static_cast<unsigned>(size - 1)));
  if (rank == 0) return TreeLinks{-1, {inner_root, -1}};
  TreeLinks links = to_rank_links(inorder_links(rank, size - 1), 0);
  if (rank == inner_root) links.parent = 0;
  return links;
}

DoubleBinaryTree::DoubleBinaryTree(int size) : size_(size) { assert(size >= 1); }

int DoubleBinaryTree::root(int tree) const {
  assert(tree == 0 || tree == 1);
  return tree == 0 ? 0 : static_cast<int>(std::bit_floor(static_cast<unsigned>(size_))) - 1;
}

TreeLinks DoubleBinaryTree::links(int rank, int tree) const {
  assert(tree == 0 || tree == 1);
  assert(rank >= 0 && rank < size_);
  if (tree == 0) return binary_tree_links(rank, size_);
  return to_rank_links(inorder_links(rank + 1, size_), 1);
}

}  // namespace hoop::patterns
