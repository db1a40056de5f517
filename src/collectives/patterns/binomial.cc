#include "collectives/patterns/binomial.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace hoop::patterns {
namespace {

// The span a relative rank covers below itself: its lowest set bit, or the whole tree for 0.
int reach(int v, int size) {
  return v == 0 ? static_cast<int>(std::bit_ceil(static_cast<unsigned>(size))) : v & -v;
}

}  // namespace

BinomialTree::BinomialTree(int size, int root) : size_(size), root_(root) {
  assert(size >= 1 && root >= 0 && root < size);
}

int BinomialTree::relative(int rank) const {
  assert(rank >= 0 && rank < size_);
  return (rank - root_ + size_) % size_;
}

int BinomialTree::rank_of(int relative) const {
  assert(relative >= 0 && relative < size_);
  return (relative + root_) % size_;
}

int BinomialTree::parent(int rank) const {
  const int v = relative(rank);
  return v == 0 ? -1 : rank_of(v & (v - 1));
}

std::vector<int> BinomialTree::children(int rank) const {
  const int v = relative(rank);
  std::vector<int> out;
  for (int step = reach(v, size_) / 2; step >= 1; step /= 2) {
    if (v + step < size_) out.push_back(rank_of(v + step));
  }
  return out;
}

int BinomialTree::subtree_size(int rank) const {
  const int v = relative(rank);
  return std::min(reach(v, size_), size_ - v);
}

}  // namespace hoop::patterns
