#include "collectives/patterns/recursive_doubling.h"

#include <bit>
#include <cassert>

namespace hoop::patterns {

Fold::Fold(int size)
    : size_(size), survivors_(static_cast<int>(std::bit_floor(static_cast<unsigned>(size)))) {
  assert(size >= 1);
}

FoldRole Fold::role(int rank) const {
  assert(rank >= 0 && rank < size_);
  if (rank >= 2 * folded()) return FoldRole::kSurvivor;
  return rank % 2 == 0 ? FoldRole::kFolded : FoldRole::kFoldReceiver;
}

int Fold::partner(int rank) const {
  switch (role(rank)) {
    case FoldRole::kSurvivor:
      return -1;
    case FoldRole::kFoldReceiver:
      return rank - 1;
    case FoldRole::kFolded:
      return rank + 1;
  }
  return -1;
}

int Fold::new_rank(int rank) const {
  switch (role(rank)) {
    case FoldRole::kSurvivor:
      return rank - folded();
    case FoldRole::kFoldReceiver:
      return rank / 2;
    case FoldRole::kFolded:
      return -1;
  }
  return -1;
}

int Fold::real_rank(int new_rank) const {
  assert(new_rank >= 0 && new_rank < survivors_);
  return new_rank < folded() ? 2 * new_rank + 1 : new_rank + folded();
}

int RecursiveDoubling::steps() const {
  return std::countr_zero(static_cast<unsigned>(fold_.survivors()));
}

int RecursiveDoubling::partner(int rank, int step) const {
  assert(step >= 0 && step < steps());
  const int me = fold_.new_rank(rank);
  assert(me >= 0);
  return fold_.real_rank(me ^ (1 << step));
}

ChunkSpan RecursiveDoubling::allgather_send_chunks(int rank, int step) {
  const int width = 1 << step;
  return ChunkSpan{rank & ~(width - 1), width};
}

ChunkSpan RecursiveDoubling::allgather_recv_chunks(int rank, int step) {
  return allgather_send_chunks(rank ^ (1 << step), step);
}

}  // namespace hoop::patterns
