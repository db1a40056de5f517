// The ring collectives as one RingPipeline of up to two phases: the reduce-scatter phase
// (ring_reduce_scatter), the allgather phase (ring_allgatherv) and both in one pipeline
// (ring_allreduce: the allgather's first slices leave while the reduce-scatter's last ones
// are still being reduced, which two calls in a row would not allow).
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

enum class Phases { kReduceScatter, kAllgather, kBoth };

/// One rank's ring pipeline over `total` steps: the reduce-scatter phase (steps
/// [0, rs_steps)), then the allgather phase, or either alone. `chunks` (in elements) are the
/// blocks the ring moves, one per rank. A step moves one chunk, slice by slice; the named state
/// below says how far posting and finishing have got.
class RingPipeline {
 public:
  RingPipeline(Context& ctx, std::byte* work, std::vector<patterns::Range> chunks, DataType dtype,
               ReduceOp op, Phases phases, const std::byte* input)
      : ctx_(ctx),
        work_(work),
        input_(input),
        dtype_(dtype),
        op_(op),
        es_(dtype_size(dtype)),
        me_(ctx.rank),
        ring_(ctx.ring()),
        chunks_(std::move(chunks)),
        rs_steps_(phases == Phases::kAllgather ? 0 : ring_.steps()),
        total_(rs_steps_ + (phases == Phases::kReduceScatter ? 0 : ring_.steps())),
        left_(ring_.left(me_)),
        right_(ring_.right(me_)),
        sends_(static_cast<std::size_t>(ctx.size)) {}

  Status run() {
    HOOP_RETURN_IF_ERROR(prepare());
    // Receives first, so that the left neighbour's early slices land in place rather than in
    // the transport's unexpected-message buffer.
    HOOP_RETURN_IF_ERROR(post_receives());
    for (std::size_t j = 0; j < slices_of_chunk(step_at(0).send_chunk); ++j)
      HOOP_RETURN_IF_ERROR(send_slice(0, j));
    for (int t = 0; t < total_; ++t) {
      cur_t_ = t;
      cur_done_ = 0;
      HOOP_RETURN_IF_ERROR(post_receives());
      const patterns::Range chunk = chunk_at(step_at(t).recv_chunk);
      const std::size_t slices = patterns::slice_count(chunk, max_slice_);
      for (std::size_t j = 0; j < slices; ++j) {
        HOOP_RETURN_IF_ERROR(wait_one(ctx_.transport, recvs_[t % 2][j], ctx_.deadline));
        if (t < rs_steps_) HOOP_RETURN_IF_ERROR(reduce_slice(t, chunk, j));
        cur_done_ = j + 1;
        if (t + 1 < total_) HOOP_RETURN_IF_ERROR(send_slice(t + 1, j));
        HOOP_RETURN_IF_ERROR(post_receives());
      }
    }
    return drain();
  }

 private:
  patterns::RingStep step_at(int t) const {
    return t < rs_steps_ ? ring_.reduce_scatter_step(me_, t)
                         : ring_.allgather_step(me_, t - rs_steps_);
  }
  const patterns::Range& chunk_at(int c) const { return chunks_[static_cast<std::size_t>(c)]; }
  std::size_t slices_of_chunk(int c) const {
    return patterns::slice_count(chunk_at(c), max_slice_);
  }
  std::size_t slices_of(int t) const { return slices_of_chunk(step_at(t).recv_chunk); }
  std::byte* stage_slot(int t, std::size_t j) const {
    return stage_[t % 2] + (j % slots_) * max_slice_ * es_;
  }

  /// Checks the schedule and sizes the slices and the staging window.
  Status prepare() {
    // The pipeline forwards what it just received; the ring pattern promises that chain.
    for (int t = 0; t + 1 < total_; ++t) {
      if (step_at(t).recv_chunk != step_at(t + 1).send_chunk)
        return internal_error("ring schedule does not forward the received chunk");
    }
    patterns::Range longest;
    for (const patterns::Range& c : chunks_)
      if (c.length > longest.length) longest = c;
    max_slice_ = std::max<std::size_t>(1, ring_slice_bytes(longest.length * es_) / es_);
    if (rs_steps_ == 0) return Status::success();  // the allgather receives in place
    // Reduce-scatter slices land in a window of kStageSlices slots per step, reused as the
    // reductions free them, so a received slice is still in cache when it is reduced (a
    // staging area as large as the chunk made every reduction read it back from memory).
    slots_ = std::min<std::size_t>(
        kStageSlices, std::max<std::size_t>(1, patterns::slice_count(longest, max_slice_)));
    const std::size_t stage_bytes = slots_ * max_slice_ * es_;
    HOOP_ASSIGN_OR_RETURN(std::byte * staging, ctx_.scratch_buffer(0, 2 * stage_bytes));
    stage_[0] = staging;
    stage_[1] = staging + stage_bytes;
    return Status::success();
  }

  /// Posts receives strictly in the order the left neighbour sends (per-pair FIFO matching):
  /// all of step t's slices before any of step t + 1's, at most one step ahead. A
  /// reduce-scatter slice waits for its staging slot, freed when slice j - slots of the same
  /// step has been reduced.
  Status post_receives() {
    while (post_t_ < total_ && post_t_ <= cur_t_ + 1) {
      if (post_j_ == slices_of(post_t_)) {
        ++post_t_;
        post_j_ = 0;
        continue;
      }
      const int c = step_at(post_t_).recv_chunk;
      if (post_j_ == 0) {
        recvs_[post_t_ % 2].clear();
        // The allgather must not overwrite a chunk that is still being sent.
        if (post_t_ >= rs_steps_ && !sends_[c].empty()) {
          HOOP_RETURN_IF_ERROR(ctx_.wait(sends_[c]));
          sends_[c].clear();
        }
      }
      const bool rs = post_t_ < rs_steps_;
      if (rs && post_j_ >= slots_ && (post_t_ > cur_t_ || cur_done_ + slots_ <= post_j_)) break;
      const patterns::Range s = patterns::slice(chunk_at(c), max_slice_, post_j_);
      std::byte* dst = rs ? stage_slot(post_t_, post_j_) : work_ + s.offset * es_;
      HOOP_ASSIGN_OR_RETURN(RequestId id, ctx_.recv(left_, dst, s.length * es_));
      recvs_[post_t_ % 2].push_back(id);
      ++post_j_;
    }
    return Status::success();
  }

  /// Sends slice j of step t's chunk: the first step sends this rank's own contribution, every
  /// later one what it reduced or received.
  Status send_slice(int t, std::size_t j) {
    const int c = step_at(t).send_chunk;
    const patterns::Range s = patterns::slice(chunk_at(c), max_slice_, j);
    const std::byte* src = t == 0 && input_ != nullptr ? input_ : work_;
    HOOP_ASSIGN_OR_RETURN(RequestId id, ctx_.send(right_, src + s.offset * es_, s.length * es_));
    sends_[c].push_back(id);
    return Status::success();
  }

  /// Reduces received slice j of reduce-scatter step t (of `chunk`) into the work buffer.
  Status reduce_slice(int t, const patterns::Range& chunk, std::size_t j) {
    const patterns::Range s = patterns::slice(chunk, max_slice_, j);
    std::byte* dst = work_ + s.offset * es_;
    const std::byte* got = stage_slot(t, j);
    // Every chunk is reduced once per rank in the reduce-scatter, so an out-of-place input is
    // read there and never copied (same operand order, same bits).
    HOOP_RETURN_IF_ERROR(input_ != nullptr
                             ? ctx_.reduce(dst, input_ + s.offset * es_, got, s.length, dtype_, op_)
                             : ctx_.reduce_into(dst, got, s.length, dtype_, op_));
    // The last reduce-scatter step completes this rank's own chunk: the owner divides, once,
    // before anyone copies it.
    if (t == rs_steps_ - 1 && op_ == ReduceOp::kAvg)
      HOOP_RETURN_IF_ERROR(ctx_.divide(dst, s.length, dtype_, ctx_.size));
    return Status::success();
  }

  /// Waits for the sends still in flight.
  Status drain() {
    std::vector<RequestId> pending;
    for (auto& ids : sends_) pending.insert(pending.end(), ids.begin(), ids.end());
    return ctx_.wait(pending);
  }

  Context& ctx_;
  std::byte* work_;
  const std::byte* input_;
  DataType dtype_;
  ReduceOp op_;
  std::size_t es_;
  int me_;
  const patterns::Ring& ring_;
  std::vector<patterns::Range> chunks_;
  int rs_steps_;
  int total_;
  int left_;
  int right_;
  std::size_t max_slice_ = 1;
  std::size_t slots_ = 1;
  std::byte* stage_[2] = {nullptr, nullptr};
  // Sends still in flight, per chunk; the receives of the current and the next step.
  std::vector<std::vector<RequestId>> sends_;
  std::vector<RequestId> recvs_[2];
  // Posting: the next receive is slice post_j_ of step post_t_. Finishing: step cur_t_, with
  // cur_done_ of its slices done.
  int post_t_ = 0;
  std::size_t post_j_ = 0;
  int cur_t_ = 0;
  std::size_t cur_done_ = 0;
};

/// `count` elements cut by Partition(count, size): the chunks of a reduce-scatter.
std::vector<patterns::Range> partition_chunks(std::size_t count, int size) {
  const patterns::Partition part(count, size);
  std::vector<patterns::Range> chunks(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) chunks[static_cast<std::size_t>(r)] = part.chunk(r);
  return chunks;
}

Status reduce_on_ring(Context& ctx, std::byte* work, std::vector<patterns::Range> chunks,
                      DataType dtype, ReduceOp op, Phases phases, const std::byte* input) {
  if (ctx.size == 1) {  // kAvg divides by 1: nothing to do but the copy
    const std::size_t count = chunks.empty() ? 0 : chunks.back().offset + chunks.back().length;
    return input != nullptr ? ctx.copy(work, input, count * dtype_size(dtype)) : Status::success();
  }
  return RingPipeline(ctx, work, std::move(chunks), dtype, op, phases, input).run();
}

}  // namespace

Status ring_reduce_scatter(Context& ctx, std::byte* work, std::size_t count, DataType dtype,
                           ReduceOp op, const std::byte* input) {
  return reduce_on_ring(ctx, work, partition_chunks(count, ctx.size), dtype, op,
                        Phases::kReduceScatter, input);
}

Status ring_reduce_scatterv(Context& ctx, std::byte* work, std::span<const std::size_t> counts,
                            DataType dtype, ReduceOp op, const std::byte* input) {
  std::vector<patterns::Range> chunks(counts.size());
  std::size_t at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    chunks[r] = {at, counts[r]};
    at += counts[r];
  }
  return reduce_on_ring(ctx, work, std::move(chunks), dtype, op, Phases::kReduceScatter, input);
}

Status ring_allreduce(Context& ctx, std::byte* work, std::size_t count, DataType dtype, ReduceOp op,
                      const std::byte* input) {
  return reduce_on_ring(ctx, work, partition_chunks(count, ctx.size), dtype, op, Phases::kBoth,
                        input);
}

Status ring_allgatherv(Context& ctx, std::byte* out, std::span<const std::size_t> offsets,
                       std::span<const std::size_t> lengths) {
  if (ctx.size == 1) return Status::success();
  const std::size_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest < 4 * kSliceBytes || ctx.size == 2) {
    // Forwarding slice by slice pays only for blocks of several full slices: below that, or in
    // a ring of one step (nothing is forwarded), a step is one exchange, which costs less than
    // the pipeline's messages and bookkeeping. Measured on 2 cores (shm, medians of 11): the
    // pipeline took 2-14% off 16 MiB allgathers at 3 and 4 ranks, but added 3-10% from 64 KiB
    // to 4 MiB, and 7% at 8 MiB on 2 ranks.
    const patterns::Ring& ring = ctx.ring();
    for (int step = 0; step < ring.steps(); ++step) {
      const patterns::RingStep st = ring.allgather_step(ctx.rank, step);
      HOOP_RETURN_IF_ERROR(ctx.exchange(ring.right(ctx.rank), out + offsets[st.send_chunk],
                                        lengths[st.send_chunk], ring.left(ctx.rank),
                                        out + offsets[st.recv_chunk], lengths[st.recv_chunk]));
    }
    return Status::success();
  }
  std::vector<patterns::Range> chunks(static_cast<std::size_t>(ctx.size));
  for (std::size_t r = 0; r < chunks.size(); ++r) chunks[r] = {offsets[r], lengths[r]};
  return RingPipeline(ctx, out, std::move(chunks), DataType::kU8, ReduceOp::kSum,
                      Phases::kAllgather, nullptr)
      .run();
}

}  // namespace hoop::collectives
