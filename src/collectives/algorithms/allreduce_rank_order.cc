// The rank-order allreduce: each rank owns one chunk (patterns::Partition), receives every
// other rank's piece of it, and combines the pieces of ranks 0, 1, ..., n-1 in that order
// (dividing last for kAvg); the ring then gathers the chunks. It moves what the ring moves,
// 2(n-1)/n of the buffer per rank, in two phases instead of a pipeline.
//
// Why it exists: on one host the host path reduces in rank order (the shared slots and the
// single-copy reads, one_host.cc). Where the order of the operations changes the bits (f16 and
// bf16 products and sums round after every operation), a device allreduce over CUDA IPC that took
// the ring or recursive doubling disagreed with the host's result in the last bit. This one
// repeats the host's order, so the device route gives the host's bits for every dtype and op.
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/patterns/partition.h"

namespace hoop::collectives {

Status allreduce_rank_order(Context& ctx, const std::byte* input, std::byte* work,
                            std::size_t count, DataType dtype, ReduceOp op) {
  const int n = ctx.size, me = ctx.rank;
  const std::size_t es = dtype_size(dtype);
  if (input == nullptr) input = work;
  if (n == 1) return ctx.copy(work, input, count * es);
  const patterns::Partition part(count, n);
  const patterns::Range own = part.chunk(me);
  const std::size_t piece = own.length * es;
  // Every rank's piece of this rank's chunk, this rank's own included: in place, the own piece
  // is the chunk the result overwrites.
  HOOP_ASSIGN_OR_RETURN(std::byte * pieces,
                        ctx.scratch_buffer(0, std::max<std::size_t>(1, piece * n)));
  std::vector<RequestId> ids;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const patterns::Range theirs = part.chunk(r);
    if (theirs.length > 0) {
      HOOP_ASSIGN_OR_RETURN(RequestId s,
                            ctx.send(r, input + theirs.offset * es, theirs.length * es));
      ids.push_back(s);
    }
    if (piece > 0) {
      HOOP_ASSIGN_OR_RETURN(RequestId d, ctx.recv(r, pieces + piece * r, piece));
      ids.push_back(d);
    }
  }
  HOOP_RETURN_IF_ERROR(ctx.copy(pieces + piece * me, input + own.offset * es, piece));
  HOOP_RETURN_IF_ERROR(ctx.wait(ids));
  if (piece > 0) {
    std::byte* sum = work + own.offset * es;
    HOOP_RETURN_IF_ERROR(ctx.reduce(sum, pieces, pieces + piece, own.length, dtype, op));
    for (int r = 2; r < n; ++r)
      HOOP_RETURN_IF_ERROR(ctx.reduce_into(sum, pieces + piece * r, own.length, dtype, op));
    if (op == ReduceOp::kAvg) HOOP_RETURN_IF_ERROR(ctx.divide(sum, own.length, dtype, n));
  }
  std::vector<std::size_t> offsets(n), lengths(n);
  for (int r = 0; r < n; ++r) {
    offsets[r] = part.chunk(r).offset * es;
    lengths[r] = part.chunk(r).length * es;
  }
  return ring_allgatherv(ctx, work, offsets, lengths);
}

}  // namespace hoop::collectives
