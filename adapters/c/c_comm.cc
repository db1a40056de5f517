// The Communicator (communicator.h) behind hoop_comm_t. The C++ collectives check their own
// arguments (null buffers, roots, peers, counts) with messages naming them; this file adds the
// checks only C needs: a null communicator, enum values outside the C++ enums, and null
// `counts` arrays, which a span could not tell from an empty one.
#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "c_abi.h"
#include "hoop/communicator.h"

struct hoop_comm {
  std::unique_ptr<hoop::Communicator> comm;
};

namespace hoop::c_abi {
namespace {

// Runs `body(Communicator&)` at the C boundary once `comm` is known not to be null.
template <typename F>
hoop_status_t with_comm(hoop_comm_t* comm, F&& body) noexcept {
  return guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(check_not_null(comm, "comm"));
    return body(*comm->comm);
  });
}

// A per-rank counts array as the span the C++ calls take.
Result<std::span<const std::size_t>> counts_of(const Communicator& comm, const size_t* counts,
                                               std::string_view what) {
  HOOP_RETURN_IF_ERROR(check_not_null(counts, what));
  return std::span<const std::size_t>(counts, static_cast<std::size_t>(comm.size()));
}

Result<std::optional<Algorithm>> algorithm_of(hoop_algorithm_t algorithm) {
  switch (algorithm) {
    case HOOP_ALGO_FROM_ENV:
      return std::optional<Algorithm>();
    case HOOP_ALGO_AUTO:
      return std::optional(Algorithm::kAuto);
    case HOOP_ALGO_RING:
      return std::optional(Algorithm::kRing);
    case HOOP_ALGO_RECURSIVE_DOUBLING:
      return std::optional(Algorithm::kRecursiveDoubling);
    case HOOP_ALGO_TREE:
      return std::optional(Algorithm::kTree);
    case HOOP_ALGO_RABENSEIFNER:
      return std::optional(Algorithm::kRabenseifner);
    case HOOP_ALGO_HIERARCHICAL:
      return std::optional(Algorithm::kHierarchical);
  }
  return invalid_argument("algorithm: unknown algorithm " +
                          std::to_string(static_cast<int>(algorithm)));
}

Result<CommunicatorOptions> options_of(const hoop_comm_options_t* options) {
  CommunicatorOptions out;
  if (options == nullptr) return out;
  if (options->transport != nullptr) out.transport = options->transport;
  if (options->key_prefix != nullptr) out.key_prefix = options->key_prefix;
  if (options->timeout_ms < 0)
    return invalid_argument("timeout_ms: " + std::to_string(options->timeout_ms) +
                            " is negative (0 takes HOOP_TIMEOUT_SECONDS)");
  if (options->timeout_ms > 0) out.timeout = std::chrono::milliseconds(options->timeout_ms);
  HOOP_ASSIGN_OR_RETURN(out.algorithm, algorithm_of(options->algorithm));
  return out;
}

}  // namespace
}  // namespace hoop::c_abi

using hoop::Communicator;
using hoop::Status;
using hoop::c_abi::counts_of;
using hoop::c_abi::dtype_of;
using hoop::c_abi::op_of;
using hoop::c_abi::with_comm;

extern "C" {

hoop_status_t hoop_comm_create(const hoop_comm_options_t* options, hoop_comm_t** comm) {
  return hoop::c_abi::guard([&]() -> Status {
    HOOP_RETURN_IF_ERROR(hoop::c_abi::check_not_null(comm, "comm"));
    *comm = nullptr;
    HOOP_ASSIGN_OR_RETURN(const hoop::CommunicatorOptions opts, hoop::c_abi::options_of(options));
    HOOP_ASSIGN_OR_RETURN(auto created, Communicator::create(opts));
    *comm = new hoop_comm{std::move(created)};
    return Status::success();
  });
}

void hoop_comm_destroy(hoop_comm_t* comm) {
  // Closing connections does not throw; the guard is for the allocator's sake all the same.
  hoop::c_abi::guard([&] {
    delete comm;
    return Status::success();
  });
}

int hoop_comm_rank(const hoop_comm_t* comm) {
  if (comm == nullptr) {
    hoop::c_abi::report(hoop::c_abi::check_not_null(comm, "comm"));
    return -1;
  }
  return comm->comm->rank();
}

int hoop_comm_size(const hoop_comm_t* comm) {
  if (comm == nullptr) {
    hoop::c_abi::report(hoop::c_abi::check_not_null(comm, "comm"));
    return -1;
  }
  return comm->comm->size();
}

hoop_status_t hoop_comm_allreduce(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                  hoop_dtype_t dtype, hoop_reduce_op_t op) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::AllreduceOptions o{.input = input, .output = output, .count = count};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    HOOP_ASSIGN_OR_RETURN(o.op, op_of(op));
    return hoop::allreduce(c, o);
  });
}

hoop_status_t hoop_comm_broadcast(hoop_comm_t* comm, void* buffer, size_t count, hoop_dtype_t dtype,
                                  int root) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::BroadcastOptions o{.buffer = buffer, .count = count, .root = root};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::broadcast(c, o);
  });
}

hoop_status_t hoop_comm_allgather(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                  hoop_dtype_t dtype) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::AllgatherOptions o{.input = input, .output = output, .count = count};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::allgather(c, o);
  });
}

hoop_status_t hoop_comm_allgatherv(hoop_comm_t* comm, const void* input, void* output,
                                   const size_t* counts, hoop_dtype_t dtype) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    HOOP_ASSIGN_OR_RETURN(const auto per_rank, counts_of(c, counts, "counts"));
    hoop::AllgathervOptions o{.input = input, .output = output, .counts = per_rank};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::allgatherv(c, o);
  });
}

hoop_status_t hoop_comm_reduce_scatter(hoop_comm_t* comm, const void* input, void* output,
                                       size_t count, hoop_dtype_t dtype, hoop_reduce_op_t op) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::ReduceScatterOptions o{.input = input, .output = output, .count = count};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    HOOP_ASSIGN_OR_RETURN(o.op, op_of(op));
    return hoop::reduce_scatter(c, o);
  });
}

hoop_status_t hoop_comm_alltoall(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                 hoop_dtype_t dtype) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::AlltoallOptions o{.input = input, .output = output, .count = count};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::alltoall(c, o);
  });
}

hoop_status_t hoop_comm_alltoallv(hoop_comm_t* comm, const void* input, const size_t* send_counts,
                                  void* output, const size_t* recv_counts, hoop_dtype_t dtype) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    HOOP_ASSIGN_OR_RETURN(const auto to, counts_of(c, send_counts, "send_counts"));
    HOOP_ASSIGN_OR_RETURN(const auto from, counts_of(c, recv_counts, "recv_counts"));
    hoop::AlltoallvOptions o{
        .input = input, .send_counts = to, .output = output, .recv_counts = from};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::alltoallv(c, o);
  });
}

hoop_status_t hoop_comm_barrier(hoop_comm_t* comm) {
  return with_comm(comm, [&](Communicator& c) { return hoop::barrier(c); });
}

hoop_status_t hoop_comm_reduce(hoop_comm_t* comm, const void* input, void* output, size_t count,
                               hoop_dtype_t dtype, hoop_reduce_op_t op, int root) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::RootReduceOptions o{.input = input, .output = output, .count = count, .root = root};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    HOOP_ASSIGN_OR_RETURN(o.op, op_of(op));
    return hoop::reduce(c, o);
  });
}

hoop_status_t hoop_comm_gather(hoop_comm_t* comm, const void* input, void* output, size_t count,
                               hoop_dtype_t dtype, int root) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::GatherOptions o{.input = input, .output = output, .count = count, .root = root};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::gather(c, o);
  });
}

hoop_status_t hoop_comm_gatherv(hoop_comm_t* comm, const void* input, void* output,
                                const size_t* counts, hoop_dtype_t dtype, int root) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    HOOP_ASSIGN_OR_RETURN(const auto per_rank, counts_of(c, counts, "counts"));
    hoop::GathervOptions o{.input = input, .output = output, .counts = per_rank, .root = root};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::gatherv(c, o);
  });
}

hoop_status_t hoop_comm_scatter(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                hoop_dtype_t dtype, int root) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::ScatterOptions o{.input = input, .output = output, .count = count, .root = root};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::scatter(c, o);
  });
}

hoop_status_t hoop_comm_scatterv(hoop_comm_t* comm, const void* input, void* output,
                                 const size_t* counts, hoop_dtype_t dtype, int root) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    HOOP_ASSIGN_OR_RETURN(const auto per_rank, counts_of(c, counts, "counts"));
    hoop::ScattervOptions o{.input = input, .output = output, .counts = per_rank, .root = root};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::scatterv(c, o);
  });
}

hoop_status_t hoop_comm_send(hoop_comm_t* comm, const void* data, size_t count, hoop_dtype_t dtype,
                             int peer, int32_t tag) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::SendOptions o{.data = data, .count = count, .peer = peer, .tag = tag};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::send(c, o);
  });
}

hoop_status_t hoop_comm_recv(hoop_comm_t* comm, void* data, size_t count, hoop_dtype_t dtype,
                             int peer, int32_t tag) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::RecvOptions o{.data = data, .count = count, .peer = peer, .tag = tag};
    HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
    return hoop::recv(c, o);
  });
}

hoop_status_t hoop_comm_sendrecv(hoop_comm_t* comm, const void* send_data, size_t send_count,
                                 hoop_dtype_t send_dtype, int send_peer, int32_t send_tag,
                                 void* recv_data, size_t recv_count, hoop_dtype_t recv_dtype,
                                 int recv_peer, int32_t recv_tag) {
  return with_comm(comm, [&](Communicator& c) -> Status {
    hoop::SendOptions to{
        .data = send_data, .count = send_count, .peer = send_peer, .tag = send_tag};
    hoop::RecvOptions from{
        .data = recv_data, .count = recv_count, .peer = recv_peer, .tag = recv_tag};
    HOOP_ASSIGN_OR_RETURN(to.dtype, dtype_of(send_dtype));
    HOOP_ASSIGN_OR_RETURN(from.dtype, dtype_of(recv_dtype));
    return hoop::sendrecv(c, to, from);
  });
}

}  // extern "C"
