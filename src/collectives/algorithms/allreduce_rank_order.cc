// The rank-order reduce-scatter and allreduce: each rank owns one chunk (patterns::Partition),
// receives every other rank's piece of it, and combines the pieces of ranks 0, 1, ..., n-1 in
// that order (dividing last for kAvg); the allreduce's ring then gathers the chunks. It moves
// what the ring moves, 2(n-1)/n of the buffer per rank, in two phases instead of a pipeline.
//
// Why it exists: on one host the host path reduces in rank order (the shared slots and the
// single-copy reads, one_host.cc). Where the order of the operations changes the bits (f16 and
// bf16 products and sums round after every operation), a device allreduce over CUDA IPC that took
// the ring or recursive doubling disagreed with the host's result in the last bit. This one
// repeats the host's order, so the device route gives the host's bits for every dtype and op;
// the reduce-scatter alone is the device route's reduce_scatter(v), for the same reason (the
// host's small ones reduce the shared slots in rank order).
#include <algorithm>
#include <span>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/patterns/partition.h"

namespace hoop::collectives {

Status reduce_scatter_rank_order(Context& ctx, const std::byte* input,
                                 std::span<const std::size_t> offsets,
                                 std::span<const std::size_t> lengths, std::byte* out,
                                 DataType dtype, ReduceOp op) {
  const int n = ctx.size, me = ctx.rank;
  const std::size_t piece = lengths[me];
  const std::size_t count = piece / dtype_size(dtype);
  // Every rank's piece of this rank's block, this rank's own included: in place, the own piece
  // may be where the result goes.
  HOOP_ASSIGN_OR_RETURN(std::byte * pieces,
                        ctx.scratch_buffer(0, std::max<std::size_t>(1, piece * n)));
  std::vector<RequestId> ids;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    if (lengths[r] > 0) {
      HOOP_ASSIGN_OR_RETURN(RequestId s, ctx.send(r, input + offsets[r], lengths[r]));
      ids.push_back(s);
    }
    if (piece > 0) {
      HOOP_ASSIGN_OR_RETURN(RequestId d, ctx.recv(r, pieces + piece * r, piece));
      ids.push_back(d);
    }
  }
  HOOP_RETURN_IF_ERROR(ctx.copy(pieces + piece * me, input + offsets[me], piece));
  HOOP_RETURN_IF_ERROR(ctx.wait(ids));
  if (piece == 0) return Status::success();
  if (n == 1) return ctx.copy(out, pieces, piece);
  HOOP_RETURN_IF_ERROR(ctx.reduce(out, pieces, pieces + piece, count, dtype, op));
  for (int r = 2; r < n; ++r)
    HOOP_RETURN_IF_ERROR(ctx.reduce_into(out, pieces + piece * r, count, dtype, op));
  if (op == ReduceOp::kAvg) HOOP_RETURN_IF_ERROR(ctx.divide(out, count, dtype, n));
  return Status::success();
}

Status allreduce_rank_order(Context& ctx, const std::byte* input, std::byte* work,
                            std::size_t count, DataType dtype, ReduceOp op) {
  const int n = ctx.size;
  const std::size_t es = dtype_size(dtype);
  if (input == nullptr) input = work;
  if (n == 1) return ctx.copy(work, input, count * es);
  const patterns::Partition part(count, n);
  std::vector<std::size_t> offsets(n), lengths(n);
  for (int r = 0; r < n; ++r) {
    offsets[r] = part.chunk(r).offset * es;
    lengths[r] = part.chunk(r).length * es;
  }
  HOOP_RETURN_IF_ERROR(reduce_scatter_rank_order(ctx, input, offsets, lengths,
                                                 work + offsets[ctx.rank], dtype, op));
  return ring_allgatherv(ctx, work, offsets, lengths);
}

}  // namespace hoop::collectives
