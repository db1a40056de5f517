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
#include <cstring>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/patterns/partition.h"
#include "collectives/patterns/ring.h"

namespace hoop::collectives {
namespace {

// Staging slots per reduce-scatter step: 8 slices of at most kSliceBytes (4 MiB) stay within a
// shared L3 while keeping the pipeline as deep as the transports need.
constexpr std::size_t kStageSlices = 8;

}  // namespace

Status ring_reduce_scatter_allgather(Context& ctx, std::byte* work, std::size_t count,
                                     DataType dtype, ReduceOp op, bool allgather,
                                     const std::byte* input) {
  const int n = ctx.size;
  const int me = ctx.rank;
  const std::size_t es = dtype_size(dtype);
  if (n == 1) {  // kAvg divides by 1: nothing to do but the copy
    return input != nullptr ? ctx.copy(work, input, count * es) : Status::success();
  }
  const patterns::Ring ring = ctx.ring();
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
  // Reduce-scatter slices land in a window of kStageSlices slots per step, reused as the
  // reductions free them, so a received slice is still in cache when it is reduced (a staging
  // area as large as the chunk made every reduction read it back from memory).
  const std::size_t slots = std::min<std::size_t>(
      kStageSlices, std::max<std::size_t>(1, patterns::slice_count(part.chunk(0), max_slice)));
  const std::size_t stage_bytes = slots * max_slice * es;
  HOOP_ASSIGN_OR_RETURN(std::byte* staging, ctx.scratch_buffer(0, 2 * stage_bytes));
  std::byte* stage[2] = {staging, staging + stage_bytes};
  auto stage_slot = [&](int t, std::size_t j) { return stage[t % 2] + (j % slots) * max_slice * es; };

  // Sends still in flight, per chunk: the allgather must not overwrite a chunk being sent.
  std::vector<std::vector<RequestId>> sends(n);
  std::vector<RequestId> recvs[2];
  auto slices_of = [&](int t) {
    return patterns::slice_count(part.chunk(step_at(t).recv_chunk), max_slice);
  };

  // Receives are posted strictly in the order the left neighbour sends (per-pair FIFO
  // matching): all of step t's slices before any of step t + 1's. (post_t, post_j) is the next
  // one; a reduce-scatter slice waits for its staging slot, freed when slice j - slots of the
  // same step has been reduced. The current step is cur_t, with cur_done slices finished.
  int post_t = 0;
  std::size_t post_j = 0;
  int cur_t = 0;
  std::size_t cur_done = 0;
  auto post_recvs = [&]() -> Status {
    while (post_t < total && post_t <= cur_t + 1) {
      if (post_j == slices_of(post_t)) {
        ++post_t;
        post_j = 0;
        continue;
      }
      const int c = step_at(post_t).recv_chunk;
      if (post_j == 0) {
        recvs[post_t % 2].clear();
        if (post_t >= rs_steps && !sends[c].empty()) {
          HOOP_RETURN_IF_ERROR(ctx.wait(sends[c]));
          sends[c].clear();
        }
      }
      const bool rs = post_t < rs_steps;
      if (rs && post_j >= slots && (post_t > cur_t || cur_done + slots <= post_j)) break;
      const patterns::Range s = patterns::slice(part.chunk(c), max_slice, post_j);
      std::byte* dst = rs ? stage_slot(post_t, post_j) : work + s.offset * es;
      HOOP_ASSIGN_OR_RETURN(RequestId id, ctx.recv(left, dst, s.length * es));
      recvs[post_t % 2].push_back(id);
      ++post_j;
    }
    return Status::success();
  };
  // The first step sends this rank's own contribution; every later one what it reduced or got.
  auto post_send = [&](int t, std::size_t j) -> Status {
    const int c = step_at(t).send_chunk;
    const patterns::Range s = patterns::slice(part.chunk(c), max_slice, j);
    const std::byte* src = t == 0 && input != nullptr ? input : work;
    HOOP_ASSIGN_OR_RETURN(RequestId id, ctx.send(right, src + s.offset * es, s.length * es));
    sends[c].push_back(id);
    return Status::success();
  };

  // Receives first, so that the left neighbour's early slices land in place rather than in
  // the transport's unexpected-message buffer.
  HOOP_RETURN_IF_ERROR(post_recvs());
  {
    const std::size_t first = patterns::slice_count(part.chunk(step_at(0).send_chunk), max_slice);
    for (std::size_t j = 0; j < first; ++j) HOOP_RETURN_IF_ERROR(post_send(0, j));
  }
  for (int t = 0; t < total; ++t) {
    cur_t = t;
    cur_done = 0;
    HOOP_RETURN_IF_ERROR(post_recvs());
    const patterns::Range chunk = part.chunk(step_at(t).recv_chunk);
    const std::size_t count_t = slices_of(t);
    for (std::size_t j = 0; j < count_t; ++j) {
      HOOP_RETURN_IF_ERROR(wait_one(ctx.transport, recvs[t % 2][j], ctx.deadline));
      const patterns::Range s = patterns::slice(chunk, max_slice, j);
      if (t < rs_steps) {
        std::byte* dst = work + s.offset * es;
        const std::byte* got = stage_slot(t, j);
        // Every chunk is reduced once per rank in the reduce-scatter, so an out-of-place input
        // is read there and never copied (same operand order, same bits).
        HOOP_RETURN_IF_ERROR(input != nullptr
                                 ? ctx.reduce(dst, input + s.offset * es, got, s.length, dtype, op)
                                 : ctx.reduce_into(dst, got, s.length, dtype, op));
        // The last reduce-scatter step completes this rank's own chunk: the owner divides,
        // once, before anyone copies it.
        if (t == rs_steps - 1 && op == ReduceOp::kAvg)
          HOOP_RETURN_IF_ERROR(ctx.divide(dst, s.length, dtype, n));
      }
      cur_done = j + 1;
      if (t + 1 < total) HOOP_RETURN_IF_ERROR(post_send(t + 1, j));
      HOOP_RETURN_IF_ERROR(post_recvs());
    }
  }
  std::vector<RequestId> pending;
  for (auto& ids : sends) pending.insert(pending.end(), ids.begin(), ids.end());
  return ctx.wait(pending);
}

}  // namespace hoop::collectives
