// Ring schedules: reduce-scatter and allgather (together: the bandwidth-optimal allreduce), and
// the ring used as a pipeline chain for broadcast.
//
// The ring visits ranks in an ORDER (a permutation of 0..n-1, identity by default) so topology
// can lay it along the fabric; neighbours follow the order. Chunk indices, however, are rank
// numbers: with Partition(count, n), chunk c is rank c's block whatever the order, which gives
// collectives their MPI placement (reduce_scatter leaves chunk r on rank r; allgather takes rank
// r's input as chunk r).
//
// Step s of either phase: every rank sends one chunk to its right neighbour and receives one chunk
// from its left neighbour; the chunk a rank receives at step s is the one its left neighbour sends
// at step s, and (in reduce-scatter) the one it forwards at step s + 1, so a pipelined
// implementation reduces a slice and forwards it without waiting for the whole chunk.
#pragma once

#include <vector>

#include "hoop/core.h"

namespace hoop::patterns {

/// What one rank does in one ring step: send chunk `send_chunk` to the right neighbour and
/// receive chunk `recv_chunk` from the left neighbour (reduced into the local chunk during
/// reduce-scatter, copied during allgather).
struct RingStep {
  int send_chunk = 0;
  int recv_chunk = 0;
  /// Steps are equal when both chunks are.
  friend bool operator==(const RingStep&, const RingStep&) = default;
};

/// A ring over the ranks of a job, in a given order.
class Ring {
 public:
  /// The ring 0 -> 1 -> ... -> size-1 -> 0 (size >= 1).
  explicit Ring(int size);
  /// The ring order[0] -> order[1] -> ... -> order[0]; invalid_argument unless `order` is a
  /// permutation of 0..order.size()-1 with at least one element.
  static Result<Ring> from_order(std::vector<int> order);

  /// The number of ranks.
  int size() const { return static_cast<int>(order_.size()); }
  /// The ring order (order()[i] is the rank at position i).
  const std::vector<int>& order() const { return order_; }
  /// Where `rank` (in [0, size)) sits in the ring order.
  int position(int rank) const { return position_[rank]; }
  /// The rank at ring position `pos`, taken modulo size (negative positions wrap too).
  int rank_at(int pos) const;
  /// The rank `rank` receives from.
  int left(int rank) const { return rank_at(position(rank) - 1); }
  /// The rank `rank` sends to.
  int right(int rank) const { return rank_at(position(rank) + 1); }

  /// The number of steps of each phase (size - 1; zero for a single rank).
  int steps() const { return size() - 1; }
  /// Reduce-scatter step `step` (in [0, steps())) for `rank`. After the last step `rank` holds
  /// the full reduction of chunk `rank`.
  RingStep reduce_scatter_step(int rank, int step) const;
  /// Allgather step `step` (in [0, steps())) for `rank`, which starts holding chunk `rank`;
  /// after the last step it holds every chunk.
  RingStep allgather_step(int rank, int step) const;
  /// The chunk `rank` holds fully reduced after reduce-scatter, and contributes to allgather.
  static int owned_chunk(int rank) { return rank; }

  /// Broadcast along the ring as a pipeline chain from `root`: the rank `rank` receives from, or
  /// -1 for the root.
  int chain_prev(int rank, int root) const;
  /// The rank `rank` forwards to in the chain from `root`, or -1 for the chain's last rank.
  int chain_next(int rank, int root) const;

 private:
  /// Takes an already validated order and its inverse.
  Ring(std::vector<int> order, std::vector<int> position)
      : order_(std::move(order)), position_(std::move(position)) {}

  std::vector<int> order_;
  std::vector<int> position_;
};

}  // namespace hoop::patterns
