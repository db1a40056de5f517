// The public collectives: validate the arguments (before any communication), prepare the
// buffers, run the algorithm under the communicator's deadline, and on failure abort the
// transport, so every other rank fails with the same cause, and add context to the error.
#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/comm_impl.h"
#include "collectives/algorithms/validate.h"

namespace hoop {
namespace {

using collectives::Context;

/// Runs `body` with a context for `comm`; aborts the transport and names `what` on failure.
Status run(Communicator& comm, const std::function<std::string()>& what,
           const std::function<Status(Context&)>& body) {
  auto* impl = dynamic_cast<collectives::CommImpl*>(&comm);
  // A Communicator implemented outside hoop gets per-call scratch.
  collectives::Scratch local;
  Context ctx{comm.transport(), comm.rank(), comm.size(), Clock::now() + comm.timeout(),
              impl != nullptr ? impl->scratch() : local};
  Status status = body(ctx);
  if (status.ok()) return status;
  comm.transport().abort(status);
  return status.with_context(what());
}

std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }
const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }

/// Copies `bytes` from `src` to `dst` unless they are the same buffer (in-place call).
void copy_in(void* dst, const void* src, std::size_t bytes) {
  if (src != nullptr && src != dst && bytes > 0) std::memmove(dst, src, bytes);
}

/// Byte offsets of consecutive blocks of `counts` elements of `esize` bytes.
void block_layout(std::span<const std::size_t> counts, std::size_t esize,
                  std::vector<std::size_t>& offsets, std::vector<std::size_t>& lengths) {
  offsets.resize(counts.size());
  lengths.resize(counts.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = at;
    lengths[i] = counts[i] * esize;
    at += lengths[i];
  }
}

}  // namespace

Algorithm allreduce_algorithm(Communicator& comm, std::size_t bytes, Algorithm requested) {
  if (requested == Algorithm::kAuto) requested = comm.forced_algorithm();
  if (requested != Algorithm::kAuto) return requested;
  auto* impl = dynamic_cast<collectives::CommImpl*>(&comm);
  return collectives::choose_allreduce(comm.size(), bytes,
                                       impl != nullptr ? impl->cost() : collectives::CostParams{});
}

Status allreduce(Communicator& comm, const AllreduceOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_RETURN_IF_ERROR(collectives::check_op(o.op));
  HOOP_RETURN_IF_ERROR(collectives::check_algorithm(o.algorithm));
  HOOP_ASSIGN_OR_RETURN(std::size_t bytes,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
  const Algorithm algo = allreduce_algorithm(comm, bytes, o.algorithm);
  auto* impl = dynamic_cast<collectives::CommImpl*>(&comm);
  if (algo == Algorithm::kHierarchical && (impl == nullptr || impl->hierarchy() == nullptr))
    return invalid_argument(
        "allreduce: the hierarchical algorithm needs ranks on two or more hosts with the same "
        "number of ranks, at least two, on each");
  auto what = [&] {
    return fmt::format("allreduce of {} {} ({}, {})", o.count, dtype_name(o.dtype), op_name(o.op),
                       algorithm_name(algo));
  };
  return run(comm, what, [&](Context& ctx) -> Status {
    std::byte* work = bytes_of(o.output);
    if (algo != Algorithm::kHierarchical)
      return collectives::allreduce_flat(ctx, algo, bytes_of(o.input), work, o.count, o.dtype,
                                         o.op);
    return collectives::allreduce_hierarchical(ctx, *impl->hierarchy(), impl->cost(),
                                               bytes_of(o.input), work, o.count, o.dtype, o.op);
  });
}

Status broadcast(Communicator& comm, const BroadcastOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_RETURN_IF_ERROR(collectives::check_root(o.root, comm.size()));
  HOOP_ASSIGN_OR_RETURN(std::size_t bytes,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.buffer, o.count, "buffer"));
  auto what = [&] {
    return fmt::format("broadcast of {} {} from rank {}", o.count, dtype_name(o.dtype), o.root);
  };
  return run(comm, what, [&](Context& ctx) {
    return collectives::broadcast_bytes(ctx, bytes_of(o.buffer), bytes, o.root);
  });
}

Status allgather(Communicator& comm, const AllgatherOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_ASSIGN_OR_RETURN(std::size_t block,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  HOOP_RETURN_IF_ERROR(collectives::checked_bytes(o.count, comm.size(), o.dtype, "count").status());
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
  copy_in(bytes_of(o.output) + block * comm.rank(), o.input, block);
  const std::vector<std::size_t> counts(comm.size(), o.count);
  std::vector<std::size_t> offsets, lengths;
  block_layout(counts, dtype_size(o.dtype), offsets, lengths);
  auto what = [&] { return fmt::format("allgather of {} {}", o.count, dtype_name(o.dtype)); };
  return run(comm, what, [&](Context& ctx) {
    return collectives::ring_allgatherv(ctx, bytes_of(o.output), offsets, lengths);
  });
}

Status allgatherv(Communicator& comm, const AllgathervOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_ASSIGN_OR_RETURN(std::size_t total,
                        collectives::check_counts(o.counts, comm.size(), o.dtype, "counts"));
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, total, "output"));
  std::vector<std::size_t> offsets, lengths;
  block_layout(o.counts, dtype_size(o.dtype), offsets, lengths);
  copy_in(bytes_of(o.output) + offsets[comm.rank()], o.input, lengths[comm.rank()]);
  auto what = [&] { return fmt::format("allgatherv of {} {}", total, dtype_name(o.dtype)); };
  return run(comm, what, [&](Context& ctx) {
    return collectives::ring_allgatherv(ctx, bytes_of(o.output), offsets, lengths);
  });
}

Status reduce_scatter(Communicator& comm, const ReduceScatterOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_RETURN_IF_ERROR(collectives::check_op(o.op));
  HOOP_ASSIGN_OR_RETURN(std::size_t block,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  HOOP_ASSIGN_OR_RETURN(std::size_t total,
                        collectives::checked_bytes(o.count, comm.size(), o.dtype, "count"));
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
  // In place (input null or equal to output): the output holds all size() * count inputs.
  const void* input = o.input != nullptr ? o.input : o.output;
  auto what = [&] {
    return fmt::format("reduce_scatter of {} x {} {} ({})", comm.size(), o.count,
                       dtype_name(o.dtype), op_name(o.op));
  };
  return run(comm, what, [&](Context& ctx) -> Status {
    // The ring reduces in a working copy: the input is const and the output holds one block.
    std::byte* work = ctx.scratch.get(1, total);
    if (total > 0) std::memcpy(work, input, total);
    HOOP_RETURN_IF_ERROR(collectives::ring_reduce_scatter_allgather(
        ctx, work, o.count * comm.size(), o.dtype, o.op, /*allgather=*/false));
    if (block > 0) std::memcpy(o.output, work + block * comm.rank(), block);
    return Status::success();
  });
}

Status alltoall(Communicator& comm, const AlltoallOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_ASSIGN_OR_RETURN(std::size_t total,
                        collectives::checked_bytes(o.count, comm.size(), o.dtype, "count"));
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
  const std::vector<std::size_t> counts(comm.size(), o.count);
  std::vector<std::size_t> offsets, lengths;
  block_layout(counts, dtype_size(o.dtype), offsets, lengths);
  auto what = [&] { return fmt::format("alltoall of {} {}", o.count, dtype_name(o.dtype)); };
  return run(comm, what, [&](Context& ctx) {
    const std::byte* in = bytes_of(o.input);
    if (o.input == nullptr || o.input == o.output) {
      // In place: blocks still to be sent would be overwritten by arriving ones.
      std::byte* copy = ctx.scratch.get(1, total);
      if (total > 0) std::memcpy(copy, o.output, total);
      in = copy;
    }
    return collectives::pairwise_alltoallv(ctx, in, offsets, lengths, bytes_of(o.output), offsets,
                                           lengths);
  });
}

Status alltoallv(Communicator& comm, const AlltoallvOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_ASSIGN_OR_RETURN(
      std::size_t send_total,
      collectives::check_counts(o.send_counts, comm.size(), o.dtype, "send_counts"));
  HOOP_ASSIGN_OR_RETURN(
      std::size_t recv_total,
      collectives::check_counts(o.recv_counts, comm.size(), o.dtype, "recv_counts"));
  const bool in_place = o.input == nullptr || o.input == o.output;
  if (!in_place) HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.input, send_total, "input"));
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, recv_total, "output"));
  const int me = comm.rank();
  if (o.send_counts[me] != o.recv_counts[me])
    return invalid_argument(fmt::format(
        "send_counts[{0}] = {1} differs from recv_counts[{0}] = {2} (this rank's own block)", me,
        o.send_counts[me], o.recv_counts[me]));
  if (in_place && !std::equal(o.send_counts.begin(), o.send_counts.end(), o.recv_counts.begin()))
    return invalid_argument("send_counts: an in-place alltoallv needs equal send and recv counts");
  const std::size_t es = dtype_size(o.dtype);
  std::vector<std::size_t> soff, slen, roff, rlen;
  block_layout(o.send_counts, es, soff, slen);
  block_layout(o.recv_counts, es, roff, rlen);
  auto what = [&] {
    return fmt::format("alltoallv of {} -> {} {}", send_total, recv_total, dtype_name(o.dtype));
  };
  return run(comm, what, [&](Context& ctx) {
    const std::byte* in = bytes_of(o.input);
    if (in_place) {
      std::byte* copy = ctx.scratch.get(1, send_total * es);
      if (send_total > 0) std::memcpy(copy, o.output, send_total * es);
      in = copy;
    }
    return collectives::pairwise_alltoallv(ctx, in, soff, slen, bytes_of(o.output), roff, rlen);
  });
}

Status barrier(Communicator& comm) {
  return run(
      comm, [] { return std::string("barrier"); },
      [](Context& ctx) { return collectives::dissemination_barrier(ctx); });
}

}  // namespace hoop
