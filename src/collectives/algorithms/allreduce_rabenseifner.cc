// Rabenseifner's allreduce: reduce-scatter by recursive halving, then allgather by recursive
// doubling, among the power-of-two survivors of the fold (patterns/rabenseifner.h).
//
// Bit-identical results: each block is reduced on one owner, divided there for kAvg, and only
// copied afterwards.
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/fold.h"
#include "collectives/patterns/rabenseifner.h"

namespace hoop::collectives {

Status allreduce_rabenseifner(Context& ctx, std::byte* work, std::size_t count, DataType dtype,
                              ReduceOp op) {
  const int me = ctx.rank;
  const std::size_t es = dtype_size(dtype);
  const std::size_t bytes = count * es;
  const patterns::Rabenseifner sched(ctx.size, count);
  const patterns::Fold& fold = sched.fold();
  HOOP_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch_buffer(0, bytes));
  HOOP_ASSIGN_OR_RETURN(bool sat_out, fold_in(ctx, fold, work, tmp, count, dtype, op));
  if (sat_out) return Status::success();
  for (int step = 0; step < sched.steps(); ++step) {
    const patterns::HalvingStep hs = sched.reduce_scatter_step(me, step);
    HOOP_RETURN_IF_ERROR(ctx.exchange_reduce(hs.partner, work + hs.send.offset * es, hs.send.length,
                                             work + hs.recv.offset * es, tmp, hs.recv.length, dtype,
                                             op));
  }
  if (op == ReduceOp::kAvg) {
    const patterns::Range own = sched.owned(me);
    HOOP_RETURN_IF_ERROR(ctx.divide(work + own.offset * es, own.length, dtype, ctx.size));
  }
  for (int step = 0; step < sched.steps(); ++step) {
    const patterns::HalvingStep hs = sched.allgather_step(me, step);
    HOOP_RETURN_IF_ERROR(ctx.exchange(hs.partner, work + hs.send.offset * es, hs.send.length * es,
                                      hs.partner, work + hs.recv.offset * es, hs.recv.length * es));
  }
  return fold_out(ctx, fold, work, bytes);
}

}  // namespace hoop::collectives
