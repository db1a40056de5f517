// Ring reduce-scatter + allgather, chunked and pipelined.
//
// Every chunk transfer is cut into slices (patterns::slice). Receives of the next step are
// posted one step ahead into a double-buffered staging area, and as soon as slice j of step t
// arrives it is reduced into the work buffer and its send for step t + 1 is posted (the chunk a
// rank receives at step t is the one it forwards at step t + 1), so sending, receiving and
// reducing overlap. Both neighbours post slices in the same order, which is what per-pair FIFO
// matching needs.
//
// Bit-identical results: chunk c is reduced along the ring in one fixed order and ends on its
// owner, which (for kAvg) divides it; the allgather then only copies, so every rank ends with
// the owner's bits.
#include <algorithm>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/patterns/partition.h"
#include "collectives/patterns/ring.h"
#include "core/reduce.h"

namespace hoop::collectives {

Status ring_reduce_scatter_allgather(Context& ctx, std::byte* work, std::size_t count,
                                     DataType dtype, ReduceOp op, bool allgather) {
  const int n = ctx.size;
  const int me = ctx.rank;
  if (n == 1) return Status::success();  // kAvg divides by 1: nothing to do
  const std::size_t es = dtype_size(dtype);
  const patterns::Ring ring(n);
  const patterns::Partition part(count, n);
  const int rs_steps = ring.steps();
  const int total = allgather ? 2 * rs_steps : rs_steps;
  auto step_at = [&](int t) {
    return t < rs_steps ? ring.reduce_scatter_step(me, t) : ring.allgather_step(me, t - rs_steps);
  };
  // The pipeline forwards what it just received; the ring pattern promises that chain.
  for (int t = 0; t + 1 < total; ++t) {
    if (step_at(t).recv_chunk != step_at(t + 1).send_chunk)
      return internal_error("ring schedule does not forward the received chunk");
  }
  const int left = ring.left(me);
  const int right = ring.right(me);
  // Partition puts the longer chunks first.
  const std::size_t max_chunk_bytes = part.chunk(0).length * es;
  const std::size_t max_slice = std::max<std::size_t>(1, ring_slice_bytes(max_chunk_bytes) / es);
  std::byte* staging = ctx.scratch.get(0, 2 * max_chunk_bytes);
  std::byte* stage[2] = {staging, staging + max_chunk_bytes};

  // Sends still in flight, per chunk: the allgather must not overwrite a chunk being sent.
  std::vector<std::vector<RequestId>> sends(n);
  std::vector<RequestId> recvs[2];

  auto post_recvs = [&](int t) -> Status {
    const int c = step_at(t).recv_chunk;
    const patterns::Range chunk = part.chunk(c);
    std::vector<RequestId>& ids = recvs[t % 2];
    ids.clear();
    if (t >= rs_steps && !sends[c].empty()) {
      HOOP_RETURN_IF_ERROR(ctx.wait(sends[c]));
      sends[c].clear();
    }
    const std::size_t slices = patterns::slice_count(chunk, max_slice);
    for (std::size_t j = 0; j < slices; ++j) {
      const patterns::Range s = patterns::slice(chunk, max_slice, j);
      std::byte* dst =
          t < rs_steps ? stage[t % 2] + (s.offset - chunk.offset) * es : work + s.offset * es;
      HOOP_ASSIGN_OR_RETURN(RequestId id, ctx.recv(left, dst, s.length * es));
      ids.push_back(id);
    }
    return Status::success();
  };
  auto post_send = [&](int t, std::size_t j) -> Status {
    const int c = step_at(t).send_chunk;
    const patterns::Range s = patterns::slice(part.chunk(c), max_slice, j);
    HOOP_ASSIGN_OR_RETURN(RequestId id, ctx.send(right, work + s.offset * es, s.length * es));
    sends[c].push_back(id);
    return Status::success();
  };

  // Receives first, so that the left neighbour's early slices land in place rather than in
  // the transport's unexpected-message buffer.
  HOOP_RETURN_IF_ERROR(post_recvs(0));
  {
    const std::size_t first = patterns::slice_count(part.chunk(step_at(0).send_chunk), max_slice);
    for (std::size_t j = 0; j < first; ++j) HOOP_RETURN_IF_ERROR(post_send(0, j));
  }
  for (int t = 0; t < total; ++t) {
    if (t + 1 < total) HOOP_RETURN_IF_ERROR(post_recvs(t + 1));
    const patterns::Range chunk = part.chunk(step_at(t).recv_chunk);
    const std::vector<RequestId>& ids = recvs[t % 2];
    for (std::size_t j = 0; j < ids.size(); ++j) {
      HOOP_RETURN_IF_ERROR(wait_one(ctx.transport, ids[j], ctx.deadline));
      const patterns::Range s = patterns::slice(chunk, max_slice, j);
      if (t < rs_steps) {
        std::byte* dst = work + s.offset * es;
        HOOP_RETURN_IF_ERROR(
            reduce_into(dst, stage[t % 2] + (s.offset - chunk.offset) * es, s.length, dtype, op));
        // The last reduce-scatter step completes this rank's own chunk: the owner divides,
        // once, before anyone copies it.
        if (t == rs_steps - 1 && op == ReduceOp::kAvg)
          HOOP_RETURN_IF_ERROR(divide(dst, s.length, dtype, n));
      }
      if (t + 1 < total) HOOP_RETURN_IF_ERROR(post_send(t + 1, j));
    }
  }
  std::vector<RequestId> pending;
  for (auto& ids : sends) pending.insert(pending.end(), ids.begin(), ids.end());
  return ctx.wait(pending);
}

}  // namespace hoop::collectives
