// Recursive doubling (allreduce for small messages; allgather for power-of-two sizes) and the
// fold that both it and Rabenseifner use for sizes that are not a power of two.
//
// The fold (as in MPICH): with p the largest power of two <= n and rem = n - p, the first 2*rem
// ranks pair up as (2i, 2i+1). Before the exchange phase the even rank of each pair sends its
// whole buffer to the odd one, which reduces it and stands for both; the even rank then sits out.
// The p survivors are renumbered 0..p-1 ("new ranks": i for the odd rank 2i+1 of pair i, r - rem
// for every rank r >= 2*rem) and run the power-of-two exchange. Afterwards each odd survivor of a
// pair sends the result back to its folded partner.
#pragma once

#include <cstddef>

#include "collectives/patterns/partition.h"

namespace hoop::patterns {

/// Chunks [first, first + count) of a Partition; Partition::chunks turns them into elements.
struct ChunkSpan {
  int first = 0;
  int count = 0;
  /// Spans are equal when first and count are.
  friend bool operator==(const ChunkSpan&, const ChunkSpan&) = default;
};

/// What a rank does in the fold around a power-of-two exchange.
enum class FoldRole {
  kSurvivor,      // takes part in the exchange; no fold partner
  kFoldReceiver,  // takes part; first receives and reduces its partner's data, then sends back
  kFolded,        // sends its data to its partner first, sits out, then receives the result
};

/// The non-power-of-two fold over `size` ranks.
class Fold {
 public:
  /// The fold of `size` (>= 1) ranks.
  explicit Fold(int size);

  /// The number of ranks.
  int size() const { return size_; }
  /// The number of ranks taking part in the exchange: the largest power of two <= size.
  int survivors() const { return survivors_; }
  /// The number of pairs folded together (size - survivors()).
  int folded() const { return size_ - survivors_; }
  /// The role of `rank`.
  FoldRole role(int rank) const;
  /// The other rank of `rank`'s pair, or -1 for a plain kSurvivor.
  int partner(int rank) const;
  /// The exchange-phase number of `rank` in [0, survivors()), or -1 when it is kFolded.
  int new_rank(int rank) const;
  /// The real rank of exchange-phase number `new_rank`.
  int real_rank(int new_rank) const;

 private:
  int size_;
  int survivors_;
};

/// Recursive doubling over the survivors of a Fold: at step k (in [0, log2 p)) each survivor
/// exchanges with the survivor whose new rank differs in bit k.
class RecursiveDoubling {
 public:
  /// The schedule for `size` (>= 1) ranks.
  explicit RecursiveDoubling(int size) : fold_(size) {}

  /// The fold around the exchange.
  const Fold& fold() const { return fold_; }
  /// The number of exchange steps, log2 of the survivor count.
  int steps() const;
  /// The real rank that survivor `rank` exchanges with at step `step`.
  int partner(int rank, int step) const;

  /// Allgather on a power-of-two size (no fold; Partition(count, size), rank r starts with chunk
  /// r): the chunks `rank` sends at step `step`, all of which it holds by then. They are the
  /// 2^step chunks of the aligned block of ranks containing `rank`.
  static ChunkSpan allgather_send_chunks(int rank, int step);
  /// Allgather on a power-of-two size: the chunks `rank` receives at step `step` (its partner's
  /// send chunks); after step log2(size) - 1 it holds every chunk.
  static ChunkSpan allgather_recv_chunks(int rank, int step);

 private:
  Fold fold_;
};

}  // namespace hoop::patterns
