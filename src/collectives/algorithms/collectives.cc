// The public collectives: validate the arguments (before any communication), prepare the
// buffers, run the algorithm under the communicator's deadline, and on failure abort the
// transport, so every other rank fails with the same cause, and add context to the error.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/dispatch.h"
#include "collectives/algorithms/one_host.h"
#include "collectives/algorithms/trace.h"
#include "collectives/algorithms/validate.h"

namespace hoop {
namespace {

using collectives::block_layout;
using collectives::bytes_of;
using collectives::CallFingerprint;
using collectives::Context;
using collectives::copy_in;
using collectives::in_slots;
using collectives::run;
using collectives::run_on_device;
using collectives::Staged;

/// An allgather of at most this many bytes in all (from 4 ranks: at 3 both take two steps)
/// takes Bruck's ceil(log2 n) exchanges instead of the ring's n - 1: small blocks cost the
/// steps' latency (docs/BENCHMARKS.md, "Small allgathers in log2 n steps").
constexpr std::size_t kBruckAllgatherBytes = std::size_t{64} << 10;
/// A reduce_scatter of at most this many bytes in all (from 4 ranks) is an allreduce by
/// recursive doubling, log2 n exchanges of the whole buffer instead of the ring's n - 1 of one
/// block, and each rank keeps its block (docs/BENCHMARKS.md, "Small reduce_scatters").
constexpr std::size_t kSmallReduceScatterBytes = std::size_t{16} << 10;

}  // namespace

std::string collective_name(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAllgather: return "allgather";
    case Collective::kAllgatherv: return "allgatherv";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kAlltoallv: return "alltoallv";
    case Collective::kBarrier: return "barrier";
    case Collective::kReduce: return "reduce";
    case Collective::kGather: return "gather";
    case Collective::kGatherv: return "gatherv";
    case Collective::kScatter: return "scatter";
    case Collective::kScatterv: return "scatterv";
    case Collective::kReduceScatterv: return "reduce_scatterv";
  }
  return fmt::format("collective {}", static_cast<int>(collective));
}

Algorithm allreduce_algorithm(Communicator& comm, std::size_t bytes, Algorithm requested) {
  if (requested == Algorithm::kAuto) requested = comm.forced_algorithm();
  if (requested != Algorithm::kAuto) return requested;
  auto* impl = collectives::impl_of(comm);
  return collectives::choose_allreduce(comm.size(), bytes,
                                       impl != nullptr ? impl->cost() : collectives::CostParams{});
}

Status allreduce(Communicator& comm, const AllreduceOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_RETURN_IF_ERROR(collectives::check_algorithm(o.algorithm));
  const bool adasum = o.op == ReduceOp::kAdasum;
  HOOP_RETURN_IF_ERROR(adasum ? collectives::check_adasum(o.dtype, o.algorithm)
                              : collectives::check_op(o.op));
  HOOP_ASSIGN_OR_RETURN(std::size_t bytes,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
  collectives::Trace trace(comm, Collective::kAllreduce, bytes, /*deferred=*/true);
  if (!adasum) {
    auto one_host_what = [&] {
      return fmt::format("allreduce of {} {} ({})", o.count, dtype_name(o.dtype), op_name(o.op));
    };
    if (auto* impl = in_slots(comm, 0, false, {{o.input, "input"}, {o.output, "output"}},
                              o.algorithm)) {
      if (collectives::slots_for(*impl, bytes, true) != nullptr) {
        trace.start("shared slots");
        return collectives::allreduce_in_slots(*impl, o, bytes, one_host_what);
      }
      if (collectives::reads_take_allreduce(*impl, bytes)) {
        trace.start("single-copy reads");
        const AllreduceBuffer whole{o.input, o.output, o.count};
        return collectives::allreduce_by_reading(*impl, {&whole, 1}, o.count, o.dtype, o.op,
                                                 one_host_what);
      }
    }
  }
  const Algorithm algo =
      adasum ? Algorithm::kRecursiveDoubling : allreduce_algorithm(comm, bytes, o.algorithm);
  trace.start(adasum ? std::string_view("adasum") : algorithm_name(algo));
  auto* impl = collectives::impl_of(comm);
  if (algo == Algorithm::kHierarchical && (impl == nullptr || impl->hierarchy() == nullptr))
    return invalid_argument(
        "allreduce: the hierarchical algorithm needs ranks on two or more hosts with the same "
        "number of ranks, at least two, on each");
  auto what = [&] {
    return fmt::format("allreduce of {} {} ({}, {})", o.count, dtype_name(o.dtype), op_name(o.op),
                       algorithm_name(algo));
  };
  collectives::DevicePart* part = nullptr;
  // Adasum has no device kernels (nor an NCCL op): its device buffers go through host copies.
  // Staged, the allreduce goes in chunks, each one's copies overlapping another's host call;
  // Adasum in one, since it combines whole vectors (their dot products), not element by element.
  const auto chunked = [&](collectives::DevicePart& dp, Deadline deadline) {
    return collectives::run_staged_chunked(
        dp, o.input, o.output, bytes,
        adasum ? std::max<std::size_t>(bytes, 1) : dtype_size(o.dtype), deadline,
        [&](const void* in, void* out, std::size_t, std::size_t length) {
          AllreduceOptions h = o;
          h.input = in;
          h.output = out;
          h.count = length / dtype_size(o.dtype);
          return allreduce(comm, h);
        });
  };
  const CallFingerprint fp{.kind = Collective::kAllreduce, .dtype = o.dtype, .op = o.op,
                           .algorithm = algo, .count = o.count};
  if (auto done =
          run_on_device(comm, o,
                        {.kind = Collective::kAllreduce,
                         .dtype = o.dtype,
                         .op = o.op,
                         .host_only = adasum,
                         .bytes = bytes},
                        &fp, what, &allreduce,
                        adasum ? nullptr : &collectives::DeviceBackend::allreduce,
                        Staged{o.input, bytes, o.output, bytes}, part, chunked))
    return *done;
  // Over CUDA IPC on one host, unless an algorithm was named: the host's one-host order, so that
  // the device gives the host's bits (allreduce_rank_order.cc).
  const bool rank_order = part != nullptr && !adasum && o.algorithm == Algorithm::kAuto &&
                          comm.forced_algorithm() == Algorithm::kAuto;
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    std::byte* work = bytes_of(o.output);
    if (rank_order)
      return collectives::allreduce_rank_order(ctx, bytes_of(o.input), work, o.count, o.dtype,
                                               o.op);
    if (algo != Algorithm::kHierarchical)
      return collectives::allreduce_flat(ctx, algo, bytes_of(o.input), work, o.count, o.dtype,
                                         o.op);
    return collectives::allreduce_hierarchical(ctx, *impl->hierarchy(), impl->cost(),
                                               bytes_of(o.input), work, o.count, o.dtype, o.op);
  }, part);
}

Status broadcast(Communicator& comm, const BroadcastOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_RETURN_IF_ERROR(collectives::check_root(o.root, comm.size()));
  HOOP_ASSIGN_OR_RETURN(std::size_t bytes,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  collectives::Trace trace(comm, Collective::kBroadcast, bytes);
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.buffer, o.count, "buffer"));
  auto what = [&] {
    return fmt::format("broadcast of {} {} from rank {}", o.count, dtype_name(o.dtype), o.root);
  };
  const CallFingerprint fp{
      .kind = Collective::kBroadcast, .dtype = o.dtype, .root = o.root, .count = o.count};
  auto* one_host = in_slots(comm, 0, false, {{o.buffer, "buffer"}});
  // On one host a mid-sized buffer moves where it lies (one copy each, as Open MPI's vader
  // does), before the slots would copy it twice: the root writes the first part of every
  // receiver's copy (root_share) while the receivers read the rest.
  if (one_host != nullptr && collectives::reads_take_copies(*one_host, bytes, false)) {
    const std::size_t head = collectives::root_share(bytes, comm.size());
    return collectives::move_by_reading(
        *one_host, fp, {o.buffer}, what,
        [&](SharedSlots& slots, std::span<const std::uint64_t> at) -> Status {
          if (comm.rank() != o.root)
            return slots.read_peer(o.root, reinterpret_cast<const std::byte*>(at[o.root]) + head,
                                   bytes_of(o.buffer) + head, bytes - head);
          for (int r = 0; r < comm.size(); ++r) {
            if (r == o.root || head == 0) continue;
            HOOP_RETURN_IF_ERROR(
                slots.write_peer(r, o.buffer, reinterpret_cast<void*>(at[r]), head));
          }
          return Status::success();
        });
  }
  if (one_host != nullptr && collectives::slots_for(*one_host, bytes, false) != nullptr)
    return collectives::broadcast_in_slots(*one_host, o, bytes, what);
  collectives::DevicePart* part = nullptr;
  if (auto done =
          run_on_device(comm, o, collectives::route_call_of(Collective::kBroadcast, o.dtype, bytes),
                        &fp, what, &broadcast, &collectives::DeviceBackend::broadcast,
                        Staged{o.buffer, 0, o.buffer, bytes}, part))
    return *done;
  return run(comm, fp, what, [&](Context& ctx) {
    return collectives::broadcast_bytes(ctx, bytes_of(o.buffer), bytes, o.root);
  }, part);
}

Status allgather(Communicator& comm, const AllgatherOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_ASSIGN_OR_RETURN(std::size_t block,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  HOOP_RETURN_IF_ERROR(collectives::checked_bytes(o.count, comm.size(), o.dtype, "count").status());
  collectives::Trace trace(comm, Collective::kAllgather, block);
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
  const collectives::UniformBlocks layout(static_cast<std::size_t>(comm.size()), o.count,
                                          dtype_size(o.dtype));
  const std::span<const std::size_t> offsets = layout.offsets();
  const std::span<const std::size_t> lengths = layout.lengths();
  auto what = [&] { return fmt::format("allgather of {} {}", o.count, dtype_name(o.dtype)); };
  const CallFingerprint fp{.kind = Collective::kAllgather, .dtype = o.dtype, .count = o.count};
  auto* one_host = in_slots(comm, 0, false, {{o.input, "input"}, {o.output, "output"}});
  // On one host mid-sized blocks are read where they lie, one copy each (as for broadcast).
  if (one_host != nullptr && collectives::reads_take_copies(*one_host, block, true)) {
    auto* out = bytes_of(o.output);
    const int me = comm.rank();
    const void* mine = o.input != nullptr ? o.input : out + block * me;
    return collectives::move_by_reading(
        *one_host, fp, {mine}, what,
        [&](SharedSlots& slots, std::span<const std::uint64_t> at) -> Status {
          // memmove: an input given as this rank's block of the output is in place.
          if (o.input != nullptr) std::memmove(out + block * me, o.input, block);
          for (int r = 0; r < comm.size(); ++r) {
            if (r == me) continue;
            HOOP_RETURN_IF_ERROR(slots.read_peer(r, reinterpret_cast<const void*>(at[r]),
                                                 out + block * r, block));
          }
          return Status::success();
        });
  }
  if (one_host != nullptr && collectives::slots_for(*one_host, block, true) != nullptr)
    return collectives::allgather_in_slots(*one_host, o, block, what);
  collectives::DevicePart* part = nullptr;
  if (auto done =
          run_on_device(comm, o, collectives::route_call_of(Collective::kAllgather, o.dtype, block),
                        &fp, what, &allgather, &collectives::DeviceBackend::allgather,
                        Staged{o.input, block, o.output, block * comm.size()}, part))
    return *done;
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    HOOP_RETURN_IF_ERROR(copy_in(ctx, bytes_of(o.output) + block * comm.rank(), o.input, block));
    if (comm.size() >= 4 && block * comm.size() <= kBruckAllgatherBytes && ctx.device == kCpuDevice)
      return collectives::bruck_allgather(ctx, bytes_of(o.output), block);
    return collectives::ring_allgatherv(ctx, bytes_of(o.output), offsets, lengths);
  }, part);
}

Status allgatherv(Communicator& comm, const AllgathervOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_ASSIGN_OR_RETURN(std::size_t total,
                        collectives::check_counts(o.counts, comm.size(), o.dtype, "counts"));
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, total, "output"));
  collectives::Trace trace(comm, Collective::kAllgatherv, total * dtype_size(o.dtype));
  std::vector<std::size_t> offsets, lengths;
  block_layout(o.counts, dtype_size(o.dtype), offsets, lengths);
  auto what = [&] { return fmt::format("allgatherv of {} {}", total, dtype_name(o.dtype)); };
  collectives::DevicePart* part = nullptr;  // NCCL has no v-variant: staged
  const Staged staged{o.input, lengths[comm.rank()], o.output, total * dtype_size(o.dtype)};
  const CallFingerprint fp{.kind = Collective::kAllgatherv, .dtype = o.dtype, .count = total,
                           .counts_hash = collectives::hash_counts(o.counts)};
  if (auto done = run_on_device(
          comm, o,
          collectives::route_call_of(Collective::kAllgatherv, o.dtype, total * dtype_size(o.dtype)),
          &fp, what, &allgatherv, nullptr, staged, part))
    return *done;
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    HOOP_RETURN_IF_ERROR(copy_in(ctx, bytes_of(o.output) + offsets[comm.rank()], o.input,
                                 lengths[comm.rank()]));
    return collectives::ring_allgatherv(ctx, bytes_of(o.output), offsets, lengths);
  }, part);
}

Status reduce_scatter(Communicator& comm, const ReduceScatterOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_RETURN_IF_ERROR(collectives::check_op(o.op));
  HOOP_ASSIGN_OR_RETURN(std::size_t block,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  HOOP_ASSIGN_OR_RETURN(std::size_t total,
                        collectives::checked_bytes(o.count, comm.size(), o.dtype, "count"));
  collectives::Trace trace(comm, Collective::kReduceScatter, total);
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
  // In place (input null or equal to output): the output holds all size() * count inputs.
  const void* input = o.input != nullptr ? o.input : o.output;
  auto what = [&] {
    return fmt::format("reduce_scatter of {} x {} {} ({})", comm.size(), o.count,
                       dtype_name(o.dtype), op_name(o.op));
  };
  // In place, the output holds all the inputs: stage all of it.
  collectives::DevicePart* part = nullptr;
  const bool in_place = o.input == nullptr || o.input == o.output;
  const CallFingerprint fp{
      .kind = Collective::kReduceScatter, .dtype = o.dtype, .op = o.op, .count = o.count};
  if (auto* impl = in_slots(comm, total, false, {{o.input, "input"}, {o.output, "output"}}))
    return collectives::reduce_scatter_in_slots(*impl, fp, input, total, o.output,
                                                block * comm.rank(), o.count, what);
  if (auto done = run_on_device(
          comm, o, collectives::route_call_of(Collective::kReduceScatter, o.dtype, block, o.op),
          &fp, what, &reduce_scatter, &collectives::DeviceBackend::reduce_scatter,
          Staged{o.input, total, o.output, in_place ? total : block}, part))
    return *done;
  // Over CUDA IPC on one host, unless an algorithm was forced: the host's order (rank order,
  // as the shared slots reduce), so that the device gives the host's bits.
  const bool rank_order = part != nullptr && comm.forced_algorithm() == Algorithm::kAuto;
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    if (rank_order) {
      const std::vector<std::size_t> counts(comm.size(), o.count);
      std::vector<std::size_t> offsets, lengths;
      block_layout(counts, dtype_size(o.dtype), offsets, lengths);
      return collectives::reduce_scatter_rank_order(ctx, bytes_of(input), offsets, lengths,
                                                    bytes_of(o.output), o.dtype, o.op);
    }
    // The ring reads this rank's inputs where they are and reduces into a working buffer (the
    // output holds one block), whose block `rank` ends fully reduced.
    HOOP_ASSIGN_OR_RETURN(std::byte* work, ctx.scratch_buffer(1, total));
    if (comm.size() >= 4 && total <= kSmallReduceScatterBytes &&
        comm.forced_algorithm() == Algorithm::kAuto) {
      HOOP_RETURN_IF_ERROR(collectives::allreduce_flat(ctx, Algorithm::kRecursiveDoubling,
                                                       bytes_of(input), work, o.count * comm.size(),
                                                       o.dtype, o.op));
    } else {
      HOOP_RETURN_IF_ERROR(collectives::ring_reduce_scatter(ctx, work, o.count * comm.size(),
                                                            o.dtype, o.op, bytes_of(input)));
    }
    return ctx.copy(o.output, work + block * comm.rank(), block);
  }, part);
}

Status reduce_scatterv(Communicator& comm, const ReduceScattervOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_RETURN_IF_ERROR(collectives::check_op(o.op));
  HOOP_ASSIGN_OR_RETURN(std::size_t total_count,
                        collectives::check_counts(o.counts, comm.size(), o.dtype, "counts"));
  const bool in_place = o.input == nullptr || o.input == o.output;
  const std::size_t mine_count = o.counts[comm.rank()];
  HOOP_RETURN_IF_ERROR(
      collectives::check_buffer(o.output, in_place ? total_count : mine_count, "output"));
  if (!in_place) HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.input, total_count, "input"));
  const std::size_t es = dtype_size(o.dtype);
  const std::size_t total = total_count * es;
  collectives::Trace trace(comm, Collective::kReduceScatterv, total);
  const std::size_t mine = mine_count * es;
  auto what = [&] {
    return fmt::format("reduce_scatterv of {} {} ({})", total_count, dtype_name(o.dtype),
                       op_name(o.op));
  };
  collectives::DevicePart* part = nullptr;  // NCCL has no v-variant: staged
  const CallFingerprint fp{.kind = Collective::kReduceScatterv, .dtype = o.dtype, .op = o.op,
                           .count = total_count,
                           .counts_hash = collectives::hash_counts(o.counts)};
  std::size_t offset = 0;
  for (int r = 0; r < comm.rank(); ++r) offset += o.counts[r] * es;
  if (auto* impl = in_slots(comm, total, false, {{o.input, "input"}, {o.output, "output"}}))
    return collectives::reduce_scatter_in_slots(
        *impl, fp, in_place ? static_cast<const void*>(o.output) : o.input, total, o.output,
        offset, mine_count, what);
  if (auto done = run_on_device(
          comm, o, collectives::route_call_of(Collective::kReduceScatterv, o.dtype, total, o.op),
          &fp, what, &reduce_scatterv, nullptr,
          Staged{o.input, total, o.output, in_place ? total : mine}, part))
    return *done;
  const bool rank_order = part != nullptr && comm.forced_algorithm() == Algorithm::kAuto;
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    const std::byte* input = bytes_of(in_place ? static_cast<const void*>(o.output) : o.input);
    if (rank_order) {  // as reduce_scatter's
      std::vector<std::size_t> offsets, lengths;
      block_layout(o.counts, es, offsets, lengths);
      return collectives::reduce_scatter_rank_order(ctx, input, offsets, lengths,
                                                    bytes_of(o.output), o.dtype, o.op);
    }
    // The ring reads this rank's inputs where they are and reduces into a working buffer,
    // whose block `rank` ends fully reduced.
    HOOP_ASSIGN_OR_RETURN(std::byte * work, ctx.scratch_buffer(1, total));
    HOOP_RETURN_IF_ERROR(
        collectives::ring_reduce_scatterv(ctx, work, o.counts, o.dtype, o.op, input));
    return ctx.copy(o.output, work + offset, mine);
  }, part);
}

Status alltoall(Communicator& comm, const AlltoallOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_ASSIGN_OR_RETURN(std::size_t total,
                        collectives::checked_bytes(o.count, comm.size(), o.dtype, "count"));
  collectives::Trace trace(comm, Collective::kAlltoall, total);
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
  const collectives::UniformBlocks layout(static_cast<std::size_t>(comm.size()), o.count,
                                          dtype_size(o.dtype));
  const std::span<const std::size_t> offsets = layout.offsets();
  const std::span<const std::size_t> lengths = layout.lengths();
  auto what = [&] { return fmt::format("alltoall of {} {}", o.count, dtype_name(o.dtype)); };
  collectives::DevicePart* part = nullptr;
  const CallFingerprint fp{.kind = Collective::kAlltoall, .dtype = o.dtype, .count = o.count};
  const std::size_t block = lengths.empty() ? 0 : lengths[0];
  // Larger blocks are read where they lie, one copy each; in place, a block another rank has
  // still to read would be overwritten, so those keep to the slots or the messages.
  auto* one_host = in_slots(comm, 0, false, {{o.input, "input"}, {o.output, "output"}});
  if (one_host != nullptr && o.input != nullptr && o.input != o.output &&
      collectives::reads_take_moves(*one_host, block, false)) {
    const std::size_t me = static_cast<std::size_t>(comm.rank());
    auto* out = bytes_of(o.output);
    return collectives::move_by_reading(
        *one_host, fp, {o.input}, what,
        [&](SharedSlots& slots, std::span<const std::uint64_t> at) -> Status {
          std::memcpy(out + block * me, bytes_of(o.input) + block * me, block);
          for (std::size_t r = 0; r < at.size(); ++r) {
            if (r == me) continue;
            HOOP_RETURN_IF_ERROR(slots.read_peer(
                static_cast<int>(r), reinterpret_cast<const void*>(at[r] + block * me),
                out + block * r, block));
          }
          return Status::success();
        });
  }
  if (one_host != nullptr && collectives::slots_for(*one_host, total, false) != nullptr)
    return collectives::alltoall_in_slots(*one_host, fp, o.input != nullptr ? o.input : o.output,
                                          block, o.output, what);
  if (auto done = run_on_device(
          comm, o,
          collectives::route_call_of(Collective::kAlltoall, o.dtype, o.count * dtype_size(o.dtype)),
          &fp, what, &alltoall, &collectives::DeviceBackend::alltoall,
          Staged{o.input, total, o.output, total}, part))
    return *done;
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    const std::byte* in = bytes_of(o.input);
    if (o.input == nullptr || o.input == o.output) {
      // In place: blocks still to be sent would be overwritten by arriving ones.
      HOOP_ASSIGN_OR_RETURN(std::byte* copy, ctx.scratch_buffer(1, total));
      HOOP_RETURN_IF_ERROR(ctx.copy(copy, o.output, total));
      in = copy;
    }
    return collectives::pairwise_alltoallv(ctx, in, offsets, lengths, bytes_of(o.output), offsets,
                                           lengths);
  }, part);
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
  collectives::Trace trace(comm, Collective::kAlltoallv, send_total * dtype_size(o.dtype));
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
  collectives::DevicePart* part = nullptr;  // NCCL has no v-variant: staged
  const Staged staged{o.input, send_total * es, o.output, recv_total * es};
  const CallFingerprint fp{.kind = Collective::kAlltoallv, .dtype = o.dtype};
  if (auto done = run_on_device(comm, o,
                                collectives::route_call_of(Collective::kAlltoallv, o.dtype,
                                                           collectives::RouteCall::kUnknownBytes),
                                &fp, what, &alltoallv, nullptr, staged, part))
    return *done;
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    const std::byte* in = bytes_of(o.input);
    if (in_place) {
      HOOP_ASSIGN_OR_RETURN(std::byte* copy, ctx.scratch_buffer(1, send_total * es));
      HOOP_RETURN_IF_ERROR(ctx.copy(copy, o.output, send_total * es));
      in = copy;
    }
    return collectives::pairwise_alltoallv(ctx, in, soff, slen, bytes_of(o.output), roff, rlen);
  }, part);
}

Status barrier(Communicator& comm) {
  const collectives::Trace trace(comm, Collective::kBarrier, 0);
  if (auto* impl = in_slots(comm, 0, false, {})) return collectives::barrier_in_slots(*impl);
  return run(
      comm, CallFingerprint{.kind = Collective::kBarrier}, [] { return std::string("barrier"); },
      [](Context& ctx) { return collectives::dissemination_barrier(ctx); });
}

}  // namespace hoop
