#include "collectives/algorithms/fold.h"


namespace hoop::collectives {

Result<bool> fold_in(Context& ctx, const patterns::Fold& fold, std::byte* work, std::byte* tmp,
                     std::size_t count, DataType dtype, ReduceOp op) {
  return fold_in(ctx, fold, work, tmp, count * dtype_size(dtype),
                 [&](std::byte* dst, const std::byte* src) {
                   return ctx.reduce_into(dst, src, count, dtype, op);
                 });
}

Result<bool> fold_in(Context& ctx, const patterns::Fold& fold, std::byte* work, std::byte* tmp,
                     std::size_t bytes, const FoldCombine& combine) {
  const patterns::FoldRole role = fold.role(ctx.rank);
  const int partner = fold.partner(ctx.rank);
  if (role == patterns::FoldRole::kFolded) {
    // Hand the data over, then wait for the finished result (send completes first so the
    // receive cannot overwrite bytes still being sent).
    HOOP_ASSIGN_OR_RETURN(RequestId s, ctx.send(partner, work, bytes));
    HOOP_RETURN_IF_ERROR(wait_one(ctx.transport, s, ctx.deadline));
    HOOP_ASSIGN_OR_RETURN(RequestId r, ctx.recv(partner, work, bytes));
    HOOP_RETURN_IF_ERROR(wait_one(ctx.transport, r, ctx.deadline));
    return true;
  }
  if (role == patterns::FoldRole::kFoldReceiver) {
    HOOP_ASSIGN_OR_RETURN(RequestId r, ctx.recv(partner, tmp, bytes));
    HOOP_RETURN_IF_ERROR(wait_one(ctx.transport, r, ctx.deadline));
    HOOP_RETURN_IF_ERROR(combine(work, tmp));
  }
  return false;
}

Status fold_out(Context& ctx, const patterns::Fold& fold, const std::byte* work,
                std::size_t bytes) {
  if (fold.role(ctx.rank) != patterns::FoldRole::kFoldReceiver) return Status::success();
  HOOP_ASSIGN_OR_RETURN(RequestId s, ctx.send(fold.partner(ctx.rank), work, bytes));
  return wait_one(ctx.transport, s, ctx.deadline);
}

}  // namespace hoop::collectives
