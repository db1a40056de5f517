// Rabenseifner's allreduce for medium and large messages: a reduce-scatter by recursive halving
// followed by an allgather by recursive doubling, on the power-of-two survivors of a Fold (see
// recursive_doubling.h). Each rank moves about 2(p-1)/p of the buffer in 2 log2(p) steps.
//
// The buffer is cut into p blocks with Partition(count, p); survivor j (its new rank) ends the
// reduce-scatter owning block j fully reduced. Halving goes from the farthest partner (distance
// p/2) to the nearest (distance 1) so that ownership follows new-rank order rather than a
// bit-reversed one; the allgather retraces the same steps in reverse.
//
// Fold steps move the whole buffer: a kFolded rank sends [0, count) to its partner before the
// halving and receives [0, count) from it after the allgather.
#pragma once

#include <cstddef>

#include "collectives/patterns/partition.h"
#include "collectives/patterns/recursive_doubling.h"

namespace hoop::patterns {

/// One step for a survivor: exchange with `partner`, sending the elements `send` and receiving
/// the elements `recv` (reduced into the local buffer in the reduce-scatter, copied in the
/// allgather). `partner` receives `send` at the same offsets and sends `recv` at the same offsets.
struct HalvingStep {
  int partner = -1;
  Range send;
  Range recv;
  /// Steps are equal when partner and both ranges are.
  friend bool operator==(const HalvingStep&, const HalvingStep&) = default;
};

/// The Rabenseifner schedule for `size` ranks and a `count`-element buffer.
class Rabenseifner {
 public:
  /// The schedule for `size` (>= 1) ranks reducing `count` elements.
  Rabenseifner(int size, std::size_t count);

  /// The fold around the halving and doubling.
  const Fold& fold() const { return fold_; }
  /// The split of the buffer into one block per survivor.
  const Partition& blocks() const { return blocks_; }
  /// The number of steps of each phase: log2 of the survivor count.
  int steps() const;
  /// The whole buffer, which the fold steps move.
  Range whole() const { return Range{0, blocks_.count()}; }
  /// Reduce-scatter step `step` for survivor `rank`: the half it gives away and the half it keeps
  /// (and receives the partner's contribution to).
  HalvingStep reduce_scatter_step(int rank, int step) const;
  /// Allgather step `step` for survivor `rank`: it sends all it has and receives as much.
  HalvingStep allgather_step(int rank, int step) const;
  /// The block survivor `rank` holds fully reduced after the reduce-scatter.
  Range owned(int rank) const;

 private:
  Fold fold_;
  Partition blocks_;
};

}  // namespace hoop::patterns
