// Hierarchical allreduce for jobs whose ranks span hosts, every host with the same L ranks:
//   1. ring reduce-scatter inside each host (shared memory): local rank i ends with chunk i
//      reduced over its host;
//   2. allreduce of chunk i across the hosts by the ranks with local index i, all L of them in
//      parallel (the cost model picks the algorithm for H ranks and N/L bytes);
//   3. ring allgather of the chunks inside each host.
// Each host link then carries 2(H-1)/H of the buffer, against 2(n-1)/n for a flat ring whose
// steps cross the links as often as they stay inside a host.
//
// Phases 1 and 3 keep the link idle, so a buffer larger than HOOP_HIERARCHICAL_SEGMENT_BYTES
// runs as a pipeline of segments when the host and the link have transports of their own: a
// second thread carries segment s across the hosts while this one reduces segment s + 1 and
// gathers segment s - 1. Every rank does its in-host steps in the same fixed order (reduce
// s, then gather s - 1), which the per-pair message order of the in-host transport needs.
//
// kAvg sums through all three phases and divides once, by the job's size, on the chunk owner
// before the allgather, so every rank ends with the same bits.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/allreduce_table.h"
#include "collectives/algorithms/group.h"
#include "collectives/patterns/partition.h"

namespace hoop::collectives {
namespace {

/// One part of the pipeline's transports, whose waits also end when the other thread has
/// failed: that thread's peers may never send what this one waits for.
class StoppableTransport final : public Transport {
 public:
  StoppableTransport(Transport& base, const std::atomic<bool>& stop) : base_(base), stop_(stop) {}

  std::string_view name() const override { return base_.name(); }
  int rank() const override { return base_.rank(); }
  int size() const override { return base_.size(); }
  bool accepts_device_memory() const override { return base_.accepts_device_memory(); }
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override {
    return base_.send(peer, data, bytes);
  }
  // The kinds of send: the rings' exchanges lend their sends (single copy over shm), and the
  // part's transport must see them as such.
  Result<RequestId> send_more(int peer, const void* data, std::size_t bytes) override {
    return base_.send_more(peer, data, bytes);
  }
  Result<RequestId> send_lent(int peer, const void* data, std::size_t bytes) override {
    return base_.send_lent(peer, data, bytes);
  }
  Result<RequestId> send_awaited(int peer, const void* data, std::size_t bytes) override {
    return base_.send_awaited(peer, data, bytes);
  }
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override {
    return base_.recv(peer, data, bytes);
  }
  Status wait(std::span<const RequestId> ids, Deadline deadline) override {
    std::vector<RequestId> left(ids.begin(), ids.end());
    while (true) {
      for (auto it = left.begin(); it != left.end();) {
        HOOP_ASSIGN_OR_RETURN(bool done, base_.test(*it));
        it = done ? left.erase(it) : it + 1;
      }
      if (left.empty()) return Status::success();
      // The other thread's failure is what the caller reports; this status is never seen.
      if (stop_.load(std::memory_order_acquire)) return aborted("the other phase failed");
      const Deadline now = Clock::now();
      // The part's own wait names the peers still outstanding.
      if (now >= deadline) return base_.wait(left, deadline);
      base_.poll(std::min(kSlice, std::chrono::duration_cast<std::chrono::microseconds>(
                                      deadline - now)));
    }
  }
  Result<bool> test(RequestId id) override { return base_.test(id); }
  void poll(std::chrono::microseconds timeout) override { base_.poll(timeout); }
  void wake() override { base_.wake(); }
  bool await_activity(std::chrono::microseconds timeout, bool messages) override {
    return base_.await_activity(timeout, messages);
  }
  void abort(const Status& cause) override { base_.abort(cause); }

 private:
  // The longest a wait sleeps before it looks at the stop flag again (a failure of the other
  // thread also wakes it at once).
  static constexpr std::chrono::microseconds kSlice{1000};
  Transport& base_;
  const std::atomic<bool>& stop_;
};

/// The part of the buffer one pass of the three phases covers, and what they need of it.
struct Segment {
  const std::byte* input;  // null: in place
  std::byte* work;
  std::size_t count;
};

/// Phase 1: this rank's chunk of `seg`, reduced over its host.
Status reduce_in_host(Context& lctx, const Segment& seg, DataType dtype, ReduceOp sum_op) {
  // The allgather overwrites every chunk but this rank's, so the reduce-scatter may read an
  // out-of-place input directly.
  return ring_reduce_scatter(lctx, seg.work, seg.count, dtype, sum_op, seg.input);
}

/// Phase 2: this rank's chunk of `seg`, reduced across the hosts (and divided for kAvg).
Status reduce_across_hosts(Context& cctx, int local_rank, int local_size, int job_size,
                           const CostParams& cross_cost, const Segment& seg, DataType dtype,
                           ReduceOp op) {
  const std::size_t es = dtype_size(dtype);
  const patterns::Range mine = patterns::Partition(seg.count, local_size).chunk(local_rank);
  std::byte* chunk = seg.work + mine.offset * es;
  CostParams flat = cross_cost;
  flat.hierarchical = false;  // the cross group is one rank per host
  const Algorithm across = choose_allreduce(cctx.size, mine.length * es, flat);
  const ReduceOp sum_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  HOOP_RETURN_IF_ERROR(allreduce_flat(cctx, across, nullptr, chunk, mine.length, dtype, sum_op));
  if (op == ReduceOp::kAvg) return cctx.divide(chunk, mine.length, dtype, job_size);
  return Status::success();
}

/// Phase 3: every chunk of `seg` gathered inside the host.
Status gather_in_host(Context& lctx, const Segment& seg, DataType dtype) {
  const std::size_t es = dtype_size(dtype);
  const patterns::Partition part(seg.count, lctx.size);
  std::vector<std::size_t> offsets(lctx.size), lengths(lctx.size);
  for (int i = 0; i < lctx.size; ++i) {
    offsets[i] = part.chunk(i).offset * es;
    lengths[i] = part.chunk(i).length * es;
  }
  return ring_allgatherv(lctx, seg.work, offsets, lengths);
}

/// The pipeline over `segments` segments of `seg_count` elements (the last one shorter).
Status run_pipeline(Context& ctx, const Hierarchy& h, const CostParams& cross_cost,
                    const Segment& all, std::size_t seg_count, std::size_t segments,
                    DataType dtype, ReduceOp op) {
  const std::size_t es = dtype_size(dtype);
  const ReduceOp sum_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  auto segment = [&](std::size_t s) {
    const std::size_t first = s * seg_count;
    return Segment{all.input != nullptr ? all.input + first * es : nullptr, all.work + first * es,
                   std::min(seg_count, all.count - first)};
  };

  std::atomic<bool> stop{false};
  StoppableTransport local_t(*h.local_part, stop), cross_t(*h.cross_part, stop);
  GroupTransport local(local_t, h.local), cross(cross_t, h.cross);
  Context lctx{local, local.rank(), local.size(), ctx.deadline, ctx.scratch};
  Context cctx{cross, cross.rank(), cross.size(), ctx.deadline, *h.cross_scratch};

  std::mutex mu;
  std::condition_variable cv;
  std::size_t reduced = 0;  // segments through phase 1 (this thread -> the cross thread)
  std::size_t crossed = 0;  // segments through phase 2 (the cross thread -> this thread)
  Status first_failure;     // the failure that stopped the pipeline
  auto fail = [&](const Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop.load()) return;
      first_failure = status;
      stop.store(true, std::memory_order_release);
    }
    cv.notify_all();
    h.local_part->wake();
    h.cross_part->wake();
  };

  auto cross_loop = [&] {
    for (std::size_t s = 0; s < segments; ++s) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return reduced > s || stop.load(); });
        if (stop.load()) return;
      }
      Status status = reduce_across_hosts(cctx, lctx.rank, lctx.size, ctx.size, cross_cost,
                                          segment(s), dtype, op);
      if (!status.ok()) return fail(status);
      {
        std::lock_guard<std::mutex> lock(mu);
        crossed = s + 1;
      }
      cv.notify_all();
    }
  };
  auto gather = [&](std::size_t s) -> Status {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return crossed > s || stop.load(); });
      if (stop.load()) return aborted("the cross-host phase failed");
    }
    return gather_in_host(lctx, segment(s), dtype);
  };
  auto host_loop = [&]() -> Status {
    for (std::size_t s = 0; s < segments; ++s) {
      HOOP_RETURN_IF_ERROR(reduce_in_host(lctx, segment(s), dtype, sum_op));
      {
        std::lock_guard<std::mutex> lock(mu);
        reduced = s + 1;
      }
      cv.notify_all();
      if (s > 0) HOOP_RETURN_IF_ERROR(gather(s - 1));
    }
    return gather(segments - 1);
  };

  std::thread cross_thread(cross_loop);
  Status status = host_loop();
  if (!status.ok()) fail(status);
  cross_thread.join();
  std::lock_guard<std::mutex> lock(mu);
  return stop.load() ? first_failure : Status::success();
}

}  // namespace

Status allreduce_flat(Context& ctx, Algorithm algorithm, const std::byte* input, std::byte* work,
                      std::size_t count, DataType dtype, ReduceOp op) {
  if (input == work) input = nullptr;
  // The ring reads an out-of-place input where it first needs it; the others start from a copy.
  if (algorithm == Algorithm::kRing || algorithm == Algorithm::kAuto)
    return ring_allreduce(ctx, work, count, dtype, op, input);
  const AllreduceEntry* entry = find_allreduce(algorithm);
  if (entry == nullptr || entry->run == nullptr)
    return internal_error(fmt::format("allreduce_flat: {} is not a flat allreduce algorithm",
                                      algorithm_name(algorithm)));
  if (input != nullptr) HOOP_RETURN_IF_ERROR(ctx.copy(work, input, count * dtype_size(dtype)));
  return entry->run(ctx, work, count, dtype, op);
}

Status allreduce_hierarchical(Context& ctx, const Hierarchy& h, const CostParams& cross_cost,
                              const std::byte* input, std::byte* work, std::size_t count,
                              DataType dtype, ReduceOp op) {
  if (input == work) input = nullptr;
  const Segment all{input, work, count};
  const std::size_t seg_count = std::max<std::size_t>(1, h.segment_bytes / dtype_size(dtype));
  const std::size_t segments = (count + seg_count - 1) / seg_count;
  if (h.segment_bytes > 0 && segments > 1 && h.local_part != nullptr && h.cross_part != nullptr &&
      h.cross_scratch != nullptr) {
    try {
      return run_pipeline(ctx, h, cross_cost, all, seg_count, segments, dtype, op);
    } catch (const std::system_error&) {
      // No thread to be had: the phases run in turn below, with the same result. Nothing was
      // sent yet, since the thread is created before the first message.
    }
  }
  const ReduceOp sum_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  GroupTransport local(ctx.transport, h.local);
  GroupTransport cross(ctx.transport, h.cross);
  Context lctx{local, local.rank(), local.size(), ctx.deadline, ctx.scratch};
  Context cctx{cross, cross.rank(), cross.size(), ctx.deadline, ctx.scratch};
  HOOP_RETURN_IF_ERROR(reduce_in_host(lctx, all, dtype, sum_op));
  HOOP_RETURN_IF_ERROR(
      reduce_across_hosts(cctx, lctx.rank, lctx.size, ctx.size, cross_cost, all, dtype, op));
  return gather_in_host(lctx, all, dtype);
}

}  // namespace hoop::collectives
