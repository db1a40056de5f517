// Recursive-doubling allreduce for small messages: log2(p) full-buffer exchanges among the
// power-of-two survivors of the fold, plus one step in and one out for folded ranks.
//
// Bit-identical results: at every step both partners combine the same two operands (the
// reduction operators are commutative bit for bit), so they hold equal buffers afterwards.

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/fold.h"
#include "collectives/patterns/recursive_doubling.h"
#include "core/adasum.h"

namespace hoop::collectives {
namespace {

// Adasum over the same hypercube: at each step the partners swap whole vectors and each
// combines the other's into its own (adasum_into gives both the same bits). A non-power of two
// first folds pairs of ranks into one vector each. Whole vectors, since every combination needs
// the dot product and norms of both.
Status allreduce_adasum(Context& ctx, std::byte* work, std::size_t count, DataType dtype) {
  if (ctx.device != kCpuDevice)
    return internal_error("adasum: device buffers reach the algorithm only through host copies");
  const std::size_t bytes = count * dtype_size(dtype);
  const patterns::RecursiveDoubling rd(ctx.size);
  HOOP_ASSIGN_OR_RETURN(std::byte* tmp, ctx.scratch_buffer(0, bytes));
  auto combine = [&](std::byte* dst, const std::byte* src) {
    return adasum_into(dst, src, count, dtype);
  };
  HOOP_ASSIGN_OR_RETURN(bool sat_out, fold_in(ctx, rd.fold(), work, tmp, bytes, combine));
  if (sat_out) return Status::success();
  for (int step = 0; step < rd.steps(); ++step) {
    const int partner = rd.partner(ctx.rank, step);
    HOOP_RETURN_IF_ERROR(ctx.exchange(partner, work, bytes, partner, tmp, bytes));
    HOOP_RETURN_IF_ERROR(combine(work, tmp));
  }
  return fold_out(ctx, rd.fold(), work, bytes);
}

}  // namespace

Status allreduce_recursive_doubling(Context& ctx, std::byte* work, std::size_t count,
                                    DataType dtype, ReduceOp op) {
  if (op == ReduceOp::kAdasum) return allreduce_adasum(ctx, work, count, dtype);
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
