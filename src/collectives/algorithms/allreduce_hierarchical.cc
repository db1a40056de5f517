// Hierarchical allreduce for jobs whose ranks span hosts, every host with the same L ranks:
//   1. ring reduce-scatter inside each host (shared memory): local rank i ends with chunk i
//      reduced over its host;
//   2. allreduce of chunk i across the hosts by the ranks with local index i, all L of them in
//      parallel (the cost model picks the algorithm for H ranks and N/L bytes);
//   3. ring allgather of the chunks inside each host.
// Each host link then carries 2(H-1)/H of the buffer, against 2(n-1)/n for a flat ring whose
// steps cross the links as often as they stay inside a host.
//
// kAvg sums through all three phases and divides once, by the job's size, on the chunk owner
// before the allgather, so every rank ends with the same bits.
#include <cstring>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/group.h"
#include "collectives/patterns/partition.h"
#include "core/reduce.h"

namespace hoop::collectives {
Status allreduce_flat(Context& ctx, Algorithm algorithm, const std::byte* input, std::byte* work,
                      std::size_t count, DataType dtype, ReduceOp op) {
  if (input == work) input = nullptr;
  // The ring reads an out-of-place input where it first needs it; the others start from a copy.
  if (algorithm == Algorithm::kRing || algorithm == Algorithm::kAuto)
    return ring_reduce_scatter_allgather(ctx, work, count, dtype, op, /*allgather=*/true, input);
  if (input != nullptr && count > 0) std::memmove(work, input, count * dtype_size(dtype));
  switch (algorithm) {
    case Algorithm::kRecursiveDoubling:
      return allreduce_recursive_doubling(ctx, work, count, dtype, op);
    case Algorithm::kRabenseifner:
      return allreduce_rabenseifner(ctx, work, count, dtype, op);
    case Algorithm::kTree:
      return allreduce_tree(ctx, work, count, dtype, op);
    default:
      return ring_reduce_scatter_allgather(ctx, work, count, dtype, op, /*allgather=*/true);
  }
}

Status allreduce_hierarchical(Context& ctx, const Hierarchy& h, const CostParams& cross_cost,
                              const std::byte* input, std::byte* work, std::size_t count,
                              DataType dtype, ReduceOp op) {
  if (input == work) input = nullptr;
  const std::size_t es = dtype_size(dtype);
  const ReduceOp sum_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  GroupTransport local(ctx.transport, h.local);
  GroupTransport cross(ctx.transport, h.cross);
  Context lctx{local, local.rank(), local.size(), ctx.deadline, ctx.scratch};
  Context cctx{cross, cross.rank(), cross.size(), ctx.deadline, ctx.scratch};

  // The allgather below overwrites every chunk but this rank's, so the reduce-scatter may read
  // an out-of-place input directly.
  HOOP_RETURN_IF_ERROR(ring_reduce_scatter_allgather(lctx, work, count, dtype, sum_op,
                                                     /*allgather=*/false, input));
  const patterns::Partition part(count, lctx.size);
  const patterns::Range mine = part.chunk(lctx.rank);
  std::byte* chunk = work + mine.offset * es;
  CostParams flat = cross_cost;
  flat.hierarchical = false;  // the cross group is one rank per host
  const Algorithm across = choose_allreduce(cctx.size, mine.length * es, flat);
  HOOP_RETURN_IF_ERROR(allreduce_flat(cctx, across, nullptr, chunk, mine.length, dtype, sum_op));
  if (op == ReduceOp::kAvg)
    HOOP_RETURN_IF_ERROR(divide(chunk, mine.length, dtype, ctx.size));

  std::vector<std::size_t> offsets(lctx.size), lengths(lctx.size);
  for (int i = 0; i < lctx.size; ++i) {
    offsets[i] = part.chunk(i).offset * es;
    lengths[i] = part.chunk(i).length * es;
  }
  return ring_allgatherv(lctx, work, offsets, lengths);
}

}  // namespace hoop::collectives
