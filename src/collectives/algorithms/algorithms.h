// The algorithms behind the public collectives. Each works in place on buffers the caller has
// already validated and prepared (input copied into the output where needed); each returns the
// first transport failure, and the caller aborts the transport and adds context.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "collectives/algorithms/context.h"
#include "collectives/algorithms/cost_model.h"

namespace hoop::collectives {

/// Largest pipeline slice of the ring and broadcast chain, in bytes. 512 KiB: big enough that
/// per-message overhead (a frame header and an epoll round) is negligible, small enough that a
/// 4 MiB chunk already gives an 8-deep pipeline in which the reduction of one slice overlaps
/// the transfer of the next.
inline constexpr std::size_t kSliceBytes = std::size_t{512} << 10;
/// Smallest pipeline slice the ring cuts a chunk into, in bytes.
inline constexpr std::size_t kMinSliceBytes = std::size_t{64} << 10;

/// The ring's slice for a chunk of `chunk_bytes`: about a quarter of the chunk, so that even
/// mid-sized messages get a pipeline (measured: a 1 MiB allreduce on 2 ranks is ~40% faster in
/// four slices than in one), within [kMinSliceBytes, kSliceBytes].
inline std::size_t ring_slice_bytes(std::size_t chunk_bytes) {
  const std::size_t quarter = (chunk_bytes + 3) / 4;
  return quarter < kMinSliceBytes ? kMinSliceBytes : quarter > kSliceBytes ? kSliceBytes : quarter;
}
/// Largest pipeline slice of the double binary tree, in bytes. Smaller than kSliceBytes because
/// the tree's lockstep pipeline needs about 2 log2(n) extra slice steps to fill and drain, and
/// at 128 KiB a step's transfer still outweighs its per-message latency several times over.
inline constexpr std::size_t kTreeSliceBytes = std::size_t{128} << 10;

/// The rank-order reduce-scatter: rank r's block is `lengths[r]` bytes at `offsets[r]` of every
/// rank's `input`; this rank receives every rank's piece of its own block and writes op over
/// them, in rank order, to `out` (the bits of the host's one-host paths, for the device route).
Status reduce_scatter_rank_order(Context& ctx, const std::byte* input,
                                 std::span<const std::size_t> offsets,
                                 std::span<const std::size_t> lengths, std::byte* out,
                                 DataType dtype, ReduceOp op);

/// Ring reduce-scatter of `work` (`count` elements cut by Partition(count, size)); chunk
/// `rank` ends fully reduced (and divided for kAvg). With `input`, this rank's contribution is
/// read from there and `work` is only written (its chunks other than chunk `rank` are then left
/// partly reduced or unwritten), which saves the copy of an out-of-place input; null: `work`
/// holds it.
Status ring_reduce_scatter(Context& ctx, std::byte* work, std::size_t count, DataType dtype,
                           ReduceOp op, const std::byte* input = nullptr);
/// ring_reduce_scatter over chunks of `counts` elements (chunk r: counts[r] elements at the
/// sum of counts[0..r)), one per rank, for reduce_scatterv.
Status ring_reduce_scatterv(Context& ctx, std::byte* work, std::span<const std::size_t> counts,
                            DataType dtype, ReduceOp op, const std::byte* input = nullptr);
/// Ring allreduce: the reduce-scatter and the allgather phases in one pipeline, so every chunk
/// ends reduced on every rank with the bits of its owner; `input` as for ring_reduce_scatter.
Status ring_allreduce(Context& ctx, std::byte* work, std::size_t count, DataType dtype,
                      ReduceOp op, const std::byte* input = nullptr);
/// Recursive-doubling allreduce of `work` in place, with the fold for non-powers of two.
Status allreduce_recursive_doubling(Context& ctx, std::byte* work, std::size_t count,
                                    DataType dtype, ReduceOp op);
/// Rabenseifner allreduce (recursive halving, then doubling) of `work` in place.
Status allreduce_rabenseifner(Context& ctx, std::byte* work, std::size_t count, DataType dtype,
                              ReduceOp op);
/// Double binary tree allreduce of `work` in place: half t is reduced up tree t and broadcast
/// back down, both trees pipelined in slices of at most kTreeSliceBytes.
Status allreduce_tree(Context& ctx, std::byte* work, std::size_t count, DataType dtype,
                      ReduceOp op);
/// Allreduce of `input` (null: `work` itself) into `work` that combines the ranks' values in
/// rank order, as the one-host host paths do (allreduce_rank_order.cc): the device route's
/// automatic choice, so that a device allreduce gives the host's bits.
Status allreduce_rank_order(Context& ctx, const std::byte* input, std::byte* work,
                            std::size_t count, DataType dtype, ReduceOp op);
/// The allreduce `algorithm` (any but kHierarchical, which needs a Hierarchy) of `input` into
/// `work`; `input` may be null or `work` itself (in place).
Status allreduce_flat(Context& ctx, Algorithm algorithm, const std::byte* input, std::byte* work,
                      std::size_t count, DataType dtype, ReduceOp op);

/// The two groups of a hierarchical allreduce, as ranks of the communicator: this rank's host
/// (`local`) and the ranks with this rank's local index on every host (`cross`), both ordered.
struct Hierarchy {
  std::vector<int> local;
  std::vector<int> cross;
  /// The transports serving the local and the cross peers when they are two different ones
  /// (shared memory inside the host, tcp across): the phases of successive segments then run
  /// on two threads at once. Null otherwise (one transport for both: the phases run in turn).
  Transport* local_part = nullptr;
  Transport* cross_part = nullptr;
  /// The cross-host thread's scratch (the calling thread keeps the Context's).
  Scratch* cross_scratch = nullptr;
  /// HOOP_HIERARCHICAL_SEGMENT_BYTES (0: no overlap).
  std::size_t segment_bytes = 0;
};
/// Hierarchical allreduce of `input` (null or `work`: in place) into `work` (see
/// allreduce_hierarchical.cc): reduce-scatter in the host, allreduce across hosts with the
/// algorithm `cross_cost` picks, allgather in the host.
Status allreduce_hierarchical(Context& ctx, const Hierarchy& h, const CostParams& cross_cost,
                              const std::byte* input, std::byte* work, std::size_t count,
                              DataType dtype, ReduceOp op);

/// Broadcast of `bytes` bytes from `root`: binomial tree for small, pipelined chain for large.
Status broadcast_bytes(Context& ctx, std::byte* buffer, std::size_t bytes, int root);
/// Ring allgather, the ring pipeline's allgather phase: block r (at offsets[r], lengths[r]
/// bytes) of `out` is already in place on rank r; afterwards every rank holds every block.
/// Each block is forwarded slice by slice as it arrives.
Status ring_allgatherv(Context& ctx, std::byte* out, std::span<const std::size_t> offsets,
                       std::span<const std::size_t> lengths);
/// Bruck's allgather of `block` bytes a rank: block r of `out` is already in place on rank r;
/// ceil(log2 n) exchanges, each with other peers, through a scratch buffer of n blocks.
Status bruck_allgather(Context& ctx, std::byte* out, std::size_t block);
/// Pairwise alltoallv in bytes: block j of `in` goes to rank j, block j of `out` comes from it.
/// `in` and `out` must not overlap.
Status pairwise_alltoallv(Context& ctx, const std::byte* in,
                          std::span<const std::size_t> send_offsets,
                          std::span<const std::size_t> send_lengths, std::byte* out,
                          std::span<const std::size_t> recv_offsets,
                          std::span<const std::size_t> recv_lengths);
/// Dissemination barrier: ceil(log2 n) rounds of empty messages.
Status dissemination_barrier(Context& ctx);

}  // namespace hoop::collectives
