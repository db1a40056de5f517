// The collectives and point-to-point calls of hoop_comm_t. Each is described once (its builder,
// where its C arguments become C++ options, and its C++ forms), and its blocking and
// non-blocking C functions are one-liners over call<> (c_comm.h). The C++ collectives check
// their own arguments (null buffers, roots, peers, counts) with messages naming them; the
// builders add the checks only C needs: enum values outside the C++ enums, and null `counts`
// arrays, which a span could not tell from an empty one.
#include <span>

#include "c_comm.h"

namespace hoop::c_abi {
namespace {

// A per-rank counts array as the span the C++ calls take. The span points at the caller's
// array, which is why a non-blocking call needs that array until it completes.
Result<std::span<const std::size_t>> counts_of(const Communicator& comm, const size_t* counts,
                                               std::string_view what) {
  HOOP_RETURN_IF_ERROR(check_not_null(counts, what));
  return std::span<const std::size_t>(counts, static_cast<std::size_t>(comm.size()));
}

// The builders. Several collectives share a shape of C arguments and C++ options with the same
// fields, so one template serves them all; a reduction's shape is its moving shape's plus op.

// (input, output, count, dtype): allgather, alltoall.
template <typename O>
Result<O> counted(const Communicator&, const void* input, void* output, size_t count,
                  hoop_dtype_t dtype) {
  O o{.input = input, .output = output, .count = count};
  HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
  return o;
}

// (input, output, count, dtype, op): allreduce, reduce_scatter.
template <typename O>
Result<O> counted_reduction(const Communicator& comm, const void* input, void* output, size_t count,
                            hoop_dtype_t dtype, hoop_reduce_op_t op) {
  HOOP_ASSIGN_OR_RETURN(O o, counted<O>(comm, input, output, count, dtype));
  HOOP_ASSIGN_OR_RETURN(o.op, op_of(op));
  return o;
}

// (input, output, count, dtype, root): gather, scatter.
template <typename O>
Result<O> counted_rooted(const Communicator&, const void* input, void* output, size_t count,
                         hoop_dtype_t dtype, int root) {
  O o{.input = input, .output = output, .count = count, .root = root};
  HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
  return o;
}

// (input, output, counts, dtype): allgatherv.
template <typename O>
Result<O> per_rank(const Communicator& comm, const void* input, void* output, const size_t* counts,
                   hoop_dtype_t dtype) {
  HOOP_ASSIGN_OR_RETURN(const auto spans, counts_of(comm, counts, "counts"));
  O o{.input = input, .output = output, .counts = spans};
  HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
  return o;
}

// (input, output, counts, dtype, root): gatherv, scatterv.
template <typename O>
Result<O> per_rank_rooted(const Communicator& comm, const void* input, void* output,
                          const size_t* counts, hoop_dtype_t dtype, int root) {
  HOOP_ASSIGN_OR_RETURN(const auto spans, counts_of(comm, counts, "counts"));
  O o{.input = input, .output = output, .counts = spans, .root = root};
  HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
  return o;
}

// (data, count, dtype, peer, tag): send (const data), recv.
template <typename O>
Result<O> one_way(const Communicator&, decltype(O::data) data, size_t count, hoop_dtype_t dtype,
                  int peer, int32_t tag) {
  O o{.data = data, .count = count, .peer = peer, .tag = tag};
  HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
  return o;
}

Result<BroadcastOptions> broadcast_options(const Communicator&, void* buffer, size_t count,
                                           hoop_dtype_t dtype, int root) {
  BroadcastOptions o{.buffer = buffer, .count = count, .root = root};
  HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
  return o;
}

Result<ReduceScattervOptions> reduce_scatterv_options(const Communicator& comm, const void* input,
                                                      void* output, const size_t* counts,
                                                      hoop_dtype_t dtype, hoop_reduce_op_t op) {
  HOOP_ASSIGN_OR_RETURN(auto o,
                        per_rank<ReduceScattervOptions>(comm, input, output, counts, dtype));
  HOOP_ASSIGN_OR_RETURN(o.op, op_of(op));
  return o;
}

Result<AlltoallvOptions> alltoallv_options(const Communicator& comm, const void* input,
                                           const size_t* send_counts, void* output,
                                           const size_t* recv_counts, hoop_dtype_t dtype) {
  HOOP_ASSIGN_OR_RETURN(const auto to, counts_of(comm, send_counts, "send_counts"));
  HOOP_ASSIGN_OR_RETURN(const auto from, counts_of(comm, recv_counts, "recv_counts"));
  AlltoallvOptions o{.input = input, .send_counts = to, .output = output, .recv_counts = from};
  HOOP_ASSIGN_OR_RETURN(o.dtype, dtype_of(dtype));
  return o;
}

Result<RootReduceOptions> reduce_options(const Communicator& comm, const void* input, void* output,
                                         size_t count, hoop_dtype_t dtype, hoop_reduce_op_t op,
                                         int root) {
  HOOP_ASSIGN_OR_RETURN(auto o,
                        counted_rooted<RootReduceOptions>(comm, input, output, count, dtype, root));
  HOOP_ASSIGN_OR_RETURN(o.op, op_of(op));
  return o;
}

// The barrier has no options; an empty value lets it share call<> with the others.
struct NoOptions {};
Result<NoOptions> barrier_options(const Communicator&) { return NoOptions{}; }
Status run_barrier(Communicator& comm, const NoOptions&) { return barrier(comm); }
Request start_barrier(Communicator& comm, const NoOptions&) { return ibarrier(comm); }

// sendrecv's two halves as one options value, for the same reason.
struct SendRecvOptions {
  SendOptions to;
  RecvOptions from;
};
Result<SendRecvOptions> sendrecv_options(const Communicator& comm, const void* send_data,
                                         size_t send_count, hoop_dtype_t send_dtype, int send_peer,
                                         int32_t send_tag, void* recv_data, size_t recv_count,
                                         hoop_dtype_t recv_dtype, int recv_peer, int32_t recv_tag) {
  SendRecvOptions o;
  HOOP_ASSIGN_OR_RETURN(
      o.to, one_way<SendOptions>(comm, send_data, send_count, send_dtype, send_peer, send_tag));
  HOOP_ASSIGN_OR_RETURN(
      o.from, one_way<RecvOptions>(comm, recv_data, recv_count, recv_dtype, recv_peer, recv_tag));
  return o;
}
Status run_sendrecv(Communicator& comm, const SendRecvOptions& o) {
  return sendrecv(comm, o.to, o.from);
}
Request start_sendrecv(Communicator& comm, const SendRecvOptions& o) {
  return isendrecv(comm, o.to, o.from);
}

// The collectives, each a builder and its C++ forms.
using Allreduce =
    Described<AllreduceOptions, &counted_reduction<AllreduceOptions>, &allreduce, &iallreduce>;
using Broadcast = Described<BroadcastOptions, &broadcast_options, &broadcast, &ibroadcast>;
using Allgather = Described<AllgatherOptions, &counted<AllgatherOptions>, &allgather, &iallgather>;
using Allgatherv =
    Described<AllgathervOptions, &per_rank<AllgathervOptions>, &allgatherv, &iallgatherv>;
using ReduceScatter = Described<ReduceScatterOptions, &counted_reduction<ReduceScatterOptions>,
                                &reduce_scatter, &ireduce_scatter>;
using ReduceScatterv =
    Described<ReduceScattervOptions, &reduce_scatterv_options, &reduce_scatterv, &ireduce_scatterv>;
using Alltoall = Described<AlltoallOptions, &counted<AlltoallOptions>, &alltoall, &ialltoall>;
using Alltoallv = Described<AlltoallvOptions, &alltoallv_options, &alltoallv, &ialltoallv>;
using Barrier = Described<NoOptions, &barrier_options, &run_barrier, &start_barrier>;
using Reduce = Described<RootReduceOptions, &reduce_options, &reduce, &ireduce>;
using Gather = Described<GatherOptions, &counted_rooted<GatherOptions>, &gather, &igather>;
using Gatherv = Described<GathervOptions, &per_rank_rooted<GathervOptions>, &gatherv, &igatherv>;
using Scatter = Described<ScatterOptions, &counted_rooted<ScatterOptions>, &scatter, &iscatter>;
using Scatterv =
    Described<ScattervOptions, &per_rank_rooted<ScattervOptions>, &scatterv, &iscatterv>;
using Send = Described<SendOptions, &one_way<SendOptions>, &send>;
using Recv = Described<RecvOptions, &one_way<RecvOptions>, &recv>;
using SendRecv = Described<SendRecvOptions, &sendrecv_options, &run_sendrecv, &start_sendrecv>;

}  // namespace
}  // namespace hoop::c_abi

using hoop::c_abi::Blocking;
using hoop::c_abi::call;
using hoop::c_abi::Start;
namespace abi = hoop::c_abi;

extern "C" {

hoop_status_t hoop_comm_allreduce(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                  hoop_dtype_t dtype, hoop_reduce_op_t op) {
  return call<abi::Allreduce>(comm, Blocking{}, input, output, count, dtype, op);
}
hoop_status_t hoop_comm_iallreduce(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                   hoop_dtype_t dtype, hoop_reduce_op_t op,
                                   hoop_request_t** request) {
  return call<abi::Allreduce>(comm, Start{request}, input, output, count, dtype, op);
}

hoop_status_t hoop_comm_broadcast(hoop_comm_t* comm, void* buffer, size_t count, hoop_dtype_t dtype,
                                  int root) {
  return call<abi::Broadcast>(comm, Blocking{}, buffer, count, dtype, root);
}
hoop_status_t hoop_comm_ibroadcast(hoop_comm_t* comm, void* buffer, size_t count,
                                   hoop_dtype_t dtype, int root, hoop_request_t** request) {
  return call<abi::Broadcast>(comm, Start{request}, buffer, count, dtype, root);
}

hoop_status_t hoop_comm_allgather(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                  hoop_dtype_t dtype) {
  return call<abi::Allgather>(comm, Blocking{}, input, output, count, dtype);
}
hoop_status_t hoop_comm_iallgather(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                   hoop_dtype_t dtype, hoop_request_t** request) {
  return call<abi::Allgather>(comm, Start{request}, input, output, count, dtype);
}

hoop_status_t hoop_comm_allgatherv(hoop_comm_t* comm, const void* input, void* output,
                                   const size_t* counts, hoop_dtype_t dtype) {
  return call<abi::Allgatherv>(comm, Blocking{}, input, output, counts, dtype);
}
hoop_status_t hoop_comm_iallgatherv(hoop_comm_t* comm, const void* input, void* output,
                                    const size_t* counts, hoop_dtype_t dtype,
                                    hoop_request_t** request) {
  return call<abi::Allgatherv>(comm, Start{request}, input, output, counts, dtype);
}

hoop_status_t hoop_comm_reduce_scatter(hoop_comm_t* comm, const void* input, void* output,
                                       size_t count, hoop_dtype_t dtype, hoop_reduce_op_t op) {
  return call<abi::ReduceScatter>(comm, Blocking{}, input, output, count, dtype, op);
}
hoop_status_t hoop_comm_ireduce_scatter(hoop_comm_t* comm, const void* input, void* output,
                                        size_t count, hoop_dtype_t dtype, hoop_reduce_op_t op,
                                        hoop_request_t** request) {
  return call<abi::ReduceScatter>(comm, Start{request}, input, output, count, dtype, op);
}

hoop_status_t hoop_comm_reduce_scatterv(hoop_comm_t* comm, const void* input, void* output,
                                        const size_t* counts, hoop_dtype_t dtype,
                                        hoop_reduce_op_t op) {
  return call<abi::ReduceScatterv>(comm, Blocking{}, input, output, counts, dtype, op);
}
hoop_status_t hoop_comm_ireduce_scatterv(hoop_comm_t* comm, const void* input, void* output,
                                         const size_t* counts, hoop_dtype_t dtype,
                                         hoop_reduce_op_t op, hoop_request_t** request) {
  return call<abi::ReduceScatterv>(comm, Start{request}, input, output, counts, dtype, op);
}

hoop_status_t hoop_comm_alltoall(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                 hoop_dtype_t dtype) {
  return call<abi::Alltoall>(comm, Blocking{}, input, output, count, dtype);
}
hoop_status_t hoop_comm_ialltoall(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                  hoop_dtype_t dtype, hoop_request_t** request) {
  return call<abi::Alltoall>(comm, Start{request}, input, output, count, dtype);
}

hoop_status_t hoop_comm_alltoallv(hoop_comm_t* comm, const void* input, const size_t* send_counts,
                                  void* output, const size_t* recv_counts, hoop_dtype_t dtype) {
  return call<abi::Alltoallv>(comm, Blocking{}, input, send_counts, output, recv_counts, dtype);
}
hoop_status_t hoop_comm_ialltoallv(hoop_comm_t* comm, const void* input, const size_t* send_counts,
                                   void* output, const size_t* recv_counts, hoop_dtype_t dtype,
                                   hoop_request_t** request) {
  return call<abi::Alltoallv>(comm, Start{request}, input, send_counts, output, recv_counts, dtype);
}

hoop_status_t hoop_comm_barrier(hoop_comm_t* comm) { return call<abi::Barrier>(comm, Blocking{}); }
hoop_status_t hoop_comm_ibarrier(hoop_comm_t* comm, hoop_request_t** request) {
  return call<abi::Barrier>(comm, Start{request});
}

hoop_status_t hoop_comm_reduce(hoop_comm_t* comm, const void* input, void* output, size_t count,
                               hoop_dtype_t dtype, hoop_reduce_op_t op, int root) {
  return call<abi::Reduce>(comm, Blocking{}, input, output, count, dtype, op, root);
}
hoop_status_t hoop_comm_ireduce(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                hoop_dtype_t dtype, hoop_reduce_op_t op, int root,
                                hoop_request_t** request) {
  return call<abi::Reduce>(comm, Start{request}, input, output, count, dtype, op, root);
}

hoop_status_t hoop_comm_gather(hoop_comm_t* comm, const void* input, void* output, size_t count,
                               hoop_dtype_t dtype, int root) {
  return call<abi::Gather>(comm, Blocking{}, input, output, count, dtype, root);
}
hoop_status_t hoop_comm_igather(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                hoop_dtype_t dtype, int root, hoop_request_t** request) {
  return call<abi::Gather>(comm, Start{request}, input, output, count, dtype, root);
}

hoop_status_t hoop_comm_gatherv(hoop_comm_t* comm, const void* input, void* output,
                                const size_t* counts, hoop_dtype_t dtype, int root) {
  return call<abi::Gatherv>(comm, Blocking{}, input, output, counts, dtype, root);
}
hoop_status_t hoop_comm_igatherv(hoop_comm_t* comm, const void* input, void* output,
                                 const size_t* counts, hoop_dtype_t dtype, int root,
                                 hoop_request_t** request) {
  return call<abi::Gatherv>(comm, Start{request}, input, output, counts, dtype, root);
}

hoop_status_t hoop_comm_scatter(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                hoop_dtype_t dtype, int root) {
  return call<abi::Scatter>(comm, Blocking{}, input, output, count, dtype, root);
}
hoop_status_t hoop_comm_iscatter(hoop_comm_t* comm, const void* input, void* output, size_t count,
                                 hoop_dtype_t dtype, int root, hoop_request_t** request) {
  return call<abi::Scatter>(comm, Start{request}, input, output, count, dtype, root);
}

hoop_status_t hoop_comm_scatterv(hoop_comm_t* comm, const void* input, void* output,
                                 const size_t* counts, hoop_dtype_t dtype, int root) {
  return call<abi::Scatterv>(comm, Blocking{}, input, output, counts, dtype, root);
}
hoop_status_t hoop_comm_iscatterv(hoop_comm_t* comm, const void* input, void* output,
                                  const size_t* counts, hoop_dtype_t dtype, int root,
                                  hoop_request_t** request) {
  return call<abi::Scatterv>(comm, Start{request}, input, output, counts, dtype, root);
}

hoop_status_t hoop_comm_send(hoop_comm_t* comm, const void* data, size_t count, hoop_dtype_t dtype,
                             int peer, int32_t tag) {
  return call<abi::Send>(comm, Blocking{}, data, count, dtype, peer, tag);
}

hoop_status_t hoop_comm_recv(hoop_comm_t* comm, void* data, size_t count, hoop_dtype_t dtype,
                             int peer, int32_t tag) {
  return call<abi::Recv>(comm, Blocking{}, data, count, dtype, peer, tag);
}

hoop_status_t hoop_comm_sendrecv(hoop_comm_t* comm, const void* send_data, size_t send_count,
                                 hoop_dtype_t send_dtype, int send_peer, int32_t send_tag,
                                 void* recv_data, size_t recv_count, hoop_dtype_t recv_dtype,
                                 int recv_peer, int32_t recv_tag) {
  return call<abi::SendRecv>(comm, Blocking{}, send_data, send_count, send_dtype, send_peer,
                             send_tag, recv_data, recv_count, recv_dtype, recv_peer, recv_tag);
}
hoop_status_t hoop_comm_isendrecv(hoop_comm_t* comm, const void* send_data, size_t send_count,
                                  hoop_dtype_t send_dtype, int send_peer, int32_t send_tag,
                                  void* recv_data, size_t recv_count, hoop_dtype_t recv_dtype,
                                  int recv_peer, int32_t recv_tag, hoop_request_t** request) {
  return call<abi::SendRecv>(comm, Start{request}, send_data, send_count, send_dtype, send_peer,
                             send_tag, recv_data, recv_count, recv_dtype, recv_peer, recv_tag);
}

}  // extern "C"
