// Pairwise-exchange alltoall(v): n - 1 steps in which every rank sends one block and receives
// one, so no rank is ever the target of two senders at once (patterns/pairwise.h).
#include "collectives/algorithms/algorithms.h"
#include "collectives/patterns/pairwise.h"

namespace hoop::collectives {

Status pairwise_alltoallv(Context& ctx, const std::byte* in,
                          std::span<const std::size_t> send_offsets,
                          std::span<const std::size_t> send_lengths, std::byte* out,
                          std::span<const std::size_t> recv_offsets,
                          std::span<const std::size_t> recv_lengths) {
  const int me = ctx.rank;
  HOOP_RETURN_IF_ERROR(ctx.copy(out + recv_offsets[me], in + send_offsets[me], recv_lengths[me]));
  const patterns::PairwiseSchedule schedule = patterns::default_pairwise_schedule(ctx.size);
  for (int step = 1; step < ctx.size; ++step) {
    const patterns::PairwiseStep ps = patterns::pairwise_step(me, ctx.size, step, schedule);
    HOOP_RETURN_IF_ERROR(
        ctx.exchange(ps.send_to, in + send_offsets[ps.send_to], send_lengths[ps.send_to],
                     ps.recv_from, out + recv_offsets[ps.recv_from], recv_lengths[ps.recv_from]));
  }
  return Status::success();
}

}  // namespace hoop::collectives
