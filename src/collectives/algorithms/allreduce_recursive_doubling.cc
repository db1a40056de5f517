// Recursive-doubling allreduce for small messages: log2(p) full-buffer exchanges among the
// power-of-two survivors of the fold, plus one step in and one out for folded ranks.
//
// Bit-identical results: at every step both partners combine the same two operands (the
// reduction operators are commutative bit for bit), so they hold equal buffers afterwards.
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/fold.h"
#include "collectives/patterns/recursive_doubling.h"

namespace hoop::collectives {

Status allreduce_recursive_doubling(Context& ctx, std::byte* work, std::size_t count,
                                    DataType dtype, ReduceOp op) {
  const int me = ctx.rank;
  const std::size_t bytes = count * dtype_size(dtype);
  const patterns::RecursiveDoubling rd(ctx.size);
  const patterns::Fold& fold = rd.fold();
  HOOP_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch_buffer(0, bytes));
  HOOP_ASSIGN_OR_RETURN(bool sat_out, fold_in(ctx, fold, work, tmp, count, dtype, op));
  if (sat_out) return Status::success();
  for (int step = 0; step < rd.steps(); ++step) {
    const int partner = rd.partner(me, step);
    HOOP_RETURN_IF_ERROR(ctx.exchange_reduce(partner, work, count, work, tmp, count, dtype, op));
  }
  if (op == ReduceOp::kAvg) HOOP_RETURN_IF_ERROR(ctx.divide(work, count, dtype, ctx.size));
  return fold_out(ctx, fold, work, bytes);
}

}  // namespace hoop::collectives
