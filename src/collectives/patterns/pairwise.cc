#include "collectives/patterns/pairwise.h"

#include <bit>
#include <cassert>

namespace hoop::patterns {

PairwiseSchedule default_pairwise_schedule(int size) {
  assert(size >= 1);
  return std::has_single_bit(static_cast<unsigned>(size)) ? PairwiseSchedule::kXor
                                                          : PairwiseSchedule::kShift;
}

PairwiseStep pairwise_step(int rank, int size, int step, PairwiseSchedule schedule) {
  assert(rank >= 0 && rank < size && step >= 1 && step < size);
  if (schedule == PairwiseSchedule::kXor) {
    assert(std::has_single_bit(static_cast<unsigned>(size)));
    return PairwiseStep{rank ^ step, rank ^ step};
  }
  return PairwiseStep{(rank + step) % size, (rank - step + size) % size};
}

}  // namespace hoop::patterns
