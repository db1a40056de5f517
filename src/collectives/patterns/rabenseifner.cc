#include "collectives/patterns/rabenseifner.h"

#include <bit>
#include <cassert>

namespace hoop::patterns {

Rabenseifner::Rabenseifner(int size, std::size_t count)
    : fold_(size), blocks_(count, fold_.survivors()) {}

int Rabenseifner::steps() const {
  return std::countr_zero(static_cast<unsigned>(fold_.survivors()));
}

// At step k the survivor's live window is the aligned run of 2d blocks containing its own block,
// d = p >> (k + 1); it keeps the half holding its own block and hands the other to the partner,
// which sits in that other half at the same relative place.
HalvingStep Rabenseifner::reduce_scatter_step(int rank, int step) const {
  assert(step >= 0 && step < steps());
  const int me = fold_.new_rank(rank);
  assert(me >= 0);
  const int d = fold_.survivors() >> (step + 1);
  const int lo = me & ~(2 * d - 1);
  const bool upper = (me & d) != 0;
  const Range low_half = blocks_.chunks(lo, d);
  const Range high_half = blocks_.chunks(lo + d, d);
  return HalvingStep{fold_.real_rank(me ^ d), upper ? low_half : high_half,
                     upper ? high_half : low_half};
}

// Allgather step k undoes reduce-scatter step steps()-1-k: the window of 2^k blocks the survivor
// has gathered goes to the partner, whose equally sized window comes back.
HalvingStep Rabenseifner::allgather_step(int rank, int step) const {
  assert(step >= 0 && step < steps());
  const int me = fold_.new_rank(rank);
  assert(me >= 0);
  const int d = 1 << step;
  const int mine = me & ~(d - 1);
  const int theirs = (me ^ d) & ~(d - 1);
  return HalvingStep{fold_.real_rank(me ^ d), blocks_.chunks(mine, d), blocks_.chunks(theirs, d)};
}

Range Rabenseifner::owned(int rank) const {
  const int me = fold_.new_rank(rank);
  assert(me >= 0);
  return blocks_.chunk(me);
}

}  // namespace hoop::patterns
