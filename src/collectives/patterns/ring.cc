#include "collectives/patterns/ring.h"

#include <cassert>
#include <numeric>
#include <string>
#include <utility>

namespace hoop::patterns {

Ring::Ring(int size) : order_(static_cast<std::size_t>(size)), position_(order_.size()) {
  assert(size >= 1);
  std::iota(order_.begin(), order_.end(), 0);
  std::iota(position_.begin(), position_.end(), 0);
}

Result<Ring> Ring::from_order(std::vector<int> order) {
  if (order.empty()) return invalid_argument("ring order is empty");
  const int n = static_cast<int>(order.size());
  std::vector<int> position(order.size(), -1);
  for (int pos = 0; pos < n; ++pos) {
    const int rank = order[static_cast<std::size_t>(pos)];
    if (rank < 0 || rank >= n) {
      return invalid_argument("ring order names rank " + std::to_string(rank) + " outside [0, " +
                              std::to_string(n) + ")");
    }
    if (position[static_cast<std::size_t>(rank)] != -1) {
      return invalid_argument("ring order names rank " + std::to_string(rank) + " twice");
    }
    position[static_cast<std::size_t>(rank)] = pos;
  }
  return Ring(std::move(order), std::move(position));
}

int Ring::rank_at(int pos) const {
  const int n = size();
  return order_[static_cast<std::size_t>(((pos % n) + n) % n)];
}

// The chunk a position sends at reduce-scatter step s was started by the rank s + 1 places to its
// left, so it reaches its owner (the rank at the position where it started minus one, i.e. after
// n - 1 hops) exactly at the last step.
RingStep Ring::reduce_scatter_step(int rank, int step) const {
  assert(step >= 0 && step < steps());
  const int pos = position(rank);
  return RingStep{rank_at(pos - 1 - step), rank_at(pos - 2 - step)};
}

// Allgather starts from each rank's own chunk and passes along what was just received.
RingStep Ring::allgather_step(int rank, int step) const {
  assert(step >= 0 && step < steps());
  const int pos = position(rank);
  return RingStep{rank_at(pos - step), rank_at(pos - 1 - step)};
}

int Ring::chain_prev(int rank, int root) const { return rank == root ? -1 : left(rank); }

int Ring::chain_next(int rank, int root) const {
  const int next = right(rank);
  return next == root ? -1 : next;
}

}  // namespace hoop::patterns
