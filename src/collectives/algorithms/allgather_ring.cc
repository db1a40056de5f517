// Ring allgather(v): n - 1 steps, each passing one block to the right neighbour, so every link
// carries (n - 1)/n of the output. Blocks go straight into the output; nothing is staged.
#include "collectives/algorithms/algorithms.h"
#include "collectives/patterns/ring.h"

namespace hoop::collectives {

Status ring_allgatherv(Context& ctx, std::byte* out, std::span<const std::size_t> offsets,
                       std::span<const std::size_t> lengths) {
  const patterns::Ring& ring = ctx.ring();
  const int left = ring.left(ctx.rank);
  const int right = ring.right(ctx.rank);
  for (int step = 0; step < ring.steps(); ++step) {
    const patterns::RingStep st = ring.allgather_step(ctx.rank, step);
    // The block received now was not held before and the one sent is never written again,
    // so the two transfers of a step cannot touch the same bytes.
    HOOP_RETURN_IF_ERROR(ctx.exchange(right, out + offsets[st.send_chunk], lengths[st.send_chunk],
                                      left, out + offsets[st.recv_chunk], lengths[st.recv_chunk]));
  }
  return Status::success();
}

}  // namespace hoop::collectives
