// The public collectives: validate the arguments (before any communication), prepare the
// buffers, run the algorithm under the communicator's deadline, and on failure abort the
// transport, so every other rank fails with the same cause, and add context to the error.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <type_traits>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/call_check.h"
#include "collectives/algorithms/comm_impl.h"
#include "collectives/algorithms/timeout_diagnosis.h"
#include "collectives/algorithms/validate.h"

namespace hoop {
namespace {

using collectives::CallFingerprint;
using collectives::Context;

/// Runs `body` with a context for `comm` (over transports/cuda, on `part`'s device, when
/// given); aborts the transport and names `what` on failure. Host calls on hoop's own
/// communicator carry `fp` to every peer (call_check.h).
Status run(Communicator& comm, const CallFingerprint& fp, const std::function<std::string()>& what,
           const std::function<Status(Context&)>& body, collectives::DevicePart* part = nullptr) {
  auto* impl = dynamic_cast<collectives::CommImpl*>(&comm);
  // A Communicator implemented outside hoop gets per-call scratch.
  collectives::Scratch local;
  Transport& base = part != nullptr ? *part->transport : comm.transport();
  std::optional<collectives::CheckedTransport> checked;
  if (part == nullptr && impl != nullptr && impl->call_check() != nullptr && comm.size() > 1)
    checked.emplace(base, *impl->call_check(), fp);
  Transport& transport = checked ? static_cast<Transport&>(*checked) : base;
  Context ctx{transport, comm.rank(), comm.size(), Clock::now() + comm.timeout(),
              impl != nullptr ? impl->scratch() : local};
  if (part != nullptr) {
    ctx.device = part->device;
    ctx.stream = part->stream.handle();
  }
  if (impl != nullptr) ctx.laid_out_ring = impl->ring();
  const std::uint64_t call = impl != nullptr ? impl->next_call() : 0;
  Status status = body(ctx);
  if (status.ok()) return status;
  // Before the abort, so that the peers it reaches learn the diagnosis too.
  if (status.code() == StatusCode::kTimeout && impl != nullptr && comm.size() > 1) {
    const auto grace = std::clamp(comm.timeout() / 4, std::chrono::milliseconds(100),
                                  std::chrono::milliseconds(1000));
    const std::string prefix =
        (impl->key_prefix().empty() ? std::string("hoop") : impl->key_prefix()) + "/comm";
    status = Status(status.code(), status.message() + collectives::diagnose_timeout(
                                                          impl->info(), prefix, call, grace));
  }
  base.abort(status);
  return status.with_context(what());
}

/// The buffers of a device call to stage through host memory: `in_bytes` at `in`, `out_bytes`
/// at `out` (run_staged keeps an input inside the output there).
struct Staged {
  const void* in = nullptr;
  std::size_t in_bytes = 0;
  void* out = nullptr;
  std::size_t out_bytes = 0;
};

/// The backend's member function for a collective's options (null: the backend lacks it).
template <typename Options>
using BackendCall = Status (collectives::DeviceBackend::*)(const Options&, void*, Deadline);

template <typename Options>
void set_buffers(Options& o, const void* in, void* out) {
  o.input = in;
  o.output = out;
}
void set_buffers(BroadcastOptions& o, const void*, void* out) { o.buffer = out; }

/// For a call on device buffers: runs it on the device backend, or on host copies of the
/// buffers (through `self`, the public collective), and returns its status; or returns nullopt
/// when the algorithm itself is to run, with `part` set when it runs on the device over
/// transports/cuda and null for host buffers. `host_only`: never on the device itself (no
/// device kernels for the call), always through host copies.
template <typename Options>
std::optional<Status> run_on_device(Communicator& comm, const Options& o,
                                    const std::function<std::string()>& what,
                                    Status (*self)(Communicator&, const Options&),
                                    std::type_identity_t<BackendCall<Options>> backend,
                                    const Staged& staged,
                                    collectives::DevicePart*& part, bool host_only = false) {
  part = nullptr;
  Result<int> device =
      collectives::buffers_device({{staged.in, "input"}, {staged.out, "output"}});
  if (!device.ok()) return device.status();
  if (*device == kCpuDevice) return std::nullopt;
  auto* impl = dynamic_cast<collectives::CommImpl*>(&comm);
  if (impl == nullptr)
    return invalid_argument(fmt::format(
        "{}: device buffers need a communicator built by Communicator::create", what()));
  Result<collectives::DevicePart*> got = impl->device(*device);
  if (!got.ok()) return got.status().with_context(what());
  part = *got;
  const Deadline deadline = Clock::now() + comm.timeout();
  if (part->route == collectives::DeviceRoute::kTransport && !host_only) return std::nullopt;
  if (part->route == collectives::DeviceRoute::kBackend && backend != nullptr) {
    Status status = ((*part->backend).*backend)(o, part->stream.handle(), deadline);
    if (status.ok()) return status;
    part->backend->abort(status);
    comm.transport().abort(status);
    return status.with_context(what());
  }
  return collectives::run_staged(*part, staged.in, staged.in_bytes, staged.out,
                                 staged.out_bytes, deadline,
                                 [&](const void* in, void* out) {
                                   Options h = o;
                                   set_buffers(h, in, out);
                                   return self(comm, h);
                                 });
}

std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }
const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }

/// Copies `bytes` from `src` to `dst` unless they are the same buffer (in-place call).
Status copy_in(Context& ctx, void* dst, const void* src, std::size_t bytes) {
  return src != nullptr ? ctx.copy(dst, src, bytes) : Status::success();
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
  }
  return fmt::format("collective {}", static_cast<int>(collective));
}

Algorithm allreduce_algorithm(Communicator& comm, std::size_t bytes, Algorithm requested) {
  if (requested == Algorithm::kAuto) requested = comm.forced_algorithm();
  if (requested != Algorithm::kAuto) return requested;
  auto* impl = dynamic_cast<collectives::CommImpl*>(&comm);
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
  const Algorithm algo =
      adasum ? Algorithm::kRecursiveDoubling : allreduce_algorithm(comm, bytes, o.algorithm);
  auto* impl = dynamic_cast<collectives::CommImpl*>(&comm);
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
  if (auto done = run_on_device(comm, o, what, &allreduce,
                                adasum ? nullptr : &collectives::DeviceBackend::allreduce,
                                Staged{o.input, bytes, o.output, bytes}, part, adasum))
    return *done;
  const CallFingerprint fp{.kind = Collective::kAllreduce, .dtype = o.dtype, .op = o.op,
                           .algorithm = algo, .count = o.count};
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    std::byte* work = bytes_of(o.output);
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
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.buffer, o.count, "buffer"));
  auto what = [&] {
    return fmt::format("broadcast of {} {} from rank {}", o.count, dtype_name(o.dtype), o.root);
  };
  collectives::DevicePart* part = nullptr;
  if (auto done = run_on_device(comm, o, what, &broadcast, &collectives::DeviceBackend::broadcast,
                                Staged{o.buffer, 0, o.buffer, bytes}, part))
    return *done;
  const CallFingerprint fp{
      .kind = Collective::kBroadcast, .dtype = o.dtype, .root = o.root, .count = o.count};
  return run(comm, fp, what, [&](Context& ctx) {
    return collectives::broadcast_bytes(ctx, bytes_of(o.buffer), bytes, o.root);
  }, part);
}

Status allgather(Communicator& comm, const AllgatherOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_ASSIGN_OR_RETURN(std::size_t block,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  HOOP_RETURN_IF_ERROR(collectives::checked_bytes(o.count, comm.size(), o.dtype, "count").status());
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
  const std::vector<std::size_t> counts(comm.size(), o.count);
  std::vector<std::size_t> offsets, lengths;
  block_layout(counts, dtype_size(o.dtype), offsets, lengths);
  auto what = [&] { return fmt::format("allgather of {} {}", o.count, dtype_name(o.dtype)); };
  collectives::DevicePart* part = nullptr;
  if (auto done = run_on_device(comm, o, what, &allgather, &collectives::DeviceBackend::allgather,
                                Staged{o.input, block, o.output, block * comm.size()}, part))
    return *done;
  const CallFingerprint fp{.kind = Collective::kAllgather, .dtype = o.dtype, .count = o.count};
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    HOOP_RETURN_IF_ERROR(copy_in(ctx, bytes_of(o.output) + block * comm.rank(), o.input, block));
    return collectives::ring_allgatherv(ctx, bytes_of(o.output), offsets, lengths);
  }, part);
}

Status allgatherv(Communicator& comm, const AllgathervOptions& o) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(o.dtype));
  HOOP_ASSIGN_OR_RETURN(std::size_t total,
                        collectives::check_counts(o.counts, comm.size(), o.dtype, "counts"));
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, total, "output"));
  std::vector<std::size_t> offsets, lengths;
  block_layout(o.counts, dtype_size(o.dtype), offsets, lengths);
  auto what = [&] { return fmt::format("allgatherv of {} {}", total, dtype_name(o.dtype)); };
  collectives::DevicePart* part = nullptr;  // NCCL has no v-variant: staged
  const Staged staged{o.input, lengths[comm.rank()], o.output, total * dtype_size(o.dtype)};
  if (auto done = run_on_device(comm, o, what, &allgatherv, nullptr, staged, part))
    return *done;
  const CallFingerprint fp{.kind = Collective::kAllgatherv, .dtype = o.dtype, .count = total,
                           .counts_hash = collectives::hash_counts(o.counts)};
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
  if (auto done = run_on_device(comm, o, what, &reduce_scatter,
                                &collectives::DeviceBackend::reduce_scatter,
                                Staged{o.input, total, o.output, in_place ? total : block}, part))
    return *done;
  const CallFingerprint fp{
      .kind = Collective::kReduceScatter, .dtype = o.dtype, .op = o.op, .count = o.count};
  return run(comm, fp, what, [&](Context& ctx) -> Status {
    // The ring reduces in a working copy: the input is const and the output holds one block.
    HOOP_ASSIGN_OR_RETURN(std::byte* work, ctx.scratch_buffer(1, total));
    HOOP_RETURN_IF_ERROR(ctx.copy(work, input, total));
    HOOP_RETURN_IF_ERROR(collectives::ring_reduce_scatter(ctx, work, o.count * comm.size(), o.dtype, o.op));
    return ctx.copy(o.output, work + block * comm.rank(), block);
  }, part);
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
  collectives::DevicePart* part = nullptr;
  if (auto done = run_on_device(comm, o, what, &alltoall, &collectives::DeviceBackend::alltoall,
                                Staged{o.input, total, o.output, total}, part))
    return *done;
  const CallFingerprint fp{.kind = Collective::kAlltoall, .dtype = o.dtype, .count = o.count};
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
  if (auto done = run_on_device(comm, o, what, &alltoallv, nullptr, staged, part))
    return *done;
  const CallFingerprint fp{.kind = Collective::kAlltoallv, .dtype = o.dtype};
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
  return run(
      comm, CallFingerprint{.kind = Collective::kBarrier}, [] { return std::string("barrier"); },
      [](Context& ctx) { return collectives::dissemination_barrier(ctx); });
}

}  // namespace hoop
