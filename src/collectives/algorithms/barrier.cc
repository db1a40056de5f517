// Dissemination barrier: in round k every rank signals rank + 2^k and waits for rank - 2^k, so
// after ceil(log2 n) rounds every rank has (transitively) heard from every other.
#include "collectives/algorithms/algorithms.h"

namespace hoop::collectives {

Status dissemination_barrier(Context& ctx) {
  const int n = ctx.size;
  std::byte token{};
  for (int dist = 1; dist < n; dist *= 2) {
    HOOP_RETURN_IF_ERROR(
        ctx.exchange((ctx.rank + dist) % n, &token, 0, (ctx.rank - dist + n) % n, &token, 0));
  }
  return Status::success();
}

}  // namespace hoop::collectives
