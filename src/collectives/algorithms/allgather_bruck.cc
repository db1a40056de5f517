// Bruck's allgather: ceil(log2 n) exchanges instead of the ring's n - 1, for small blocks, whose
// time is the steps' latency. Step k sends the 2^k blocks gathered so far (fewer in the last
// step) to the rank 2^k before this one and appends as many from the rank 2^k after it; this
// rank's buffer then holds every block in rotated order, put in place at the end.
#include <algorithm>

#include "collectives/algorithms/algorithms.h"

namespace hoop::collectives {

Status bruck_allgather(Context& ctx, std::byte* out, std::size_t block) {
  const int n = ctx.size;
  const int me = ctx.rank;
  if (n == 1 || block == 0) return Status::success();
  // run[i] holds the block of rank (me + i) mod n; the first `have` are here.
  HOOP_ASSIGN_OR_RETURN(std::byte * run,
                        ctx.scratch_buffer(1, static_cast<std::size_t>(n) * block));
  HOOP_RETURN_IF_ERROR(ctx.copy(run, out + static_cast<std::size_t>(me) * block, block));
  int have = 1;
  for (int dist = 1; dist < n; dist *= 2) {
    const auto blocks = static_cast<std::size_t>(std::min(dist, n - dist)) * block;
    HOOP_RETURN_IF_ERROR(ctx.exchange((me - dist + n) % n, run, blocks, (me + dist) % n,
                                      run + static_cast<std::size_t>(have) * block, blocks));
    have += std::min(dist, n - dist);
  }
  for (int i = 1; i < n; ++i) {
    HOOP_RETURN_IF_ERROR(ctx.copy(out + static_cast<std::size_t>((me + i) % n) * block,
                                  run + static_cast<std::size_t>(i) * block, block));
  }
  return Status::success();
}

}  // namespace hoop::collectives
