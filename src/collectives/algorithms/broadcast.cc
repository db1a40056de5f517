// Broadcast: a binomial tree (ceil(log2 n) whole-buffer hops) for small buffers, a pipelined
// chain along the ring for large ones (every link carries the buffer once, in slices, so the
// time approaches one buffer transfer as the slices shrink relative to the buffer).
#include <algorithm>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/patterns/binomial.h"
#include "collectives/patterns/partition.h"
#include "collectives/patterns/ring.h"

namespace hoop::collectives {
namespace {

/// Below this many bytes the tree's log2(n) latency beats the chain's n - 1 hops.
constexpr std::size_t kBroadcastChainBytes = std::size_t{256} << 10;

Status broadcast_binomial(Context& ctx, std::byte* buffer, std::size_t bytes, int root) {
  const patterns::BinomialTree tree(ctx.size, root);
  const int parent = tree.parent(ctx.rank);
  if (parent >= 0) {
    HOOP_ASSIGN_OR_RETURN(RequestId r, ctx.recv(parent, buffer, bytes));
    HOOP_RETURN_IF_ERROR(wait_one(ctx.transport, r, ctx.deadline));
  }
  std::vector<RequestId> sends;
  for (int child : tree.children(ctx.rank)) {
    HOOP_ASSIGN_OR_RETURN(RequestId s, ctx.send_awaited(child, buffer, bytes));
    sends.push_back(s);
  }
  return ctx.wait(sends);
}

Status broadcast_chain(Context& ctx, std::byte* buffer, std::size_t bytes, int root) {
  const patterns::Ring& ring = ctx.ring();
  const int prev = ring.chain_prev(ctx.rank, root);
  const int next = ring.chain_next(ctx.rank, root);
  const patterns::Range whole{0, bytes};
  const std::size_t slices = patterns::slice_count(whole, kSliceBytes);
  std::vector<RequestId> recvs;
  std::vector<RequestId> sends;
  if (prev >= 0) {
    for (std::size_t j = 0; j < slices; ++j) {
      const patterns::Range s = patterns::slice(whole, kSliceBytes, j);
      HOOP_ASSIGN_OR_RETURN(RequestId r, ctx.recv(prev, buffer + s.offset, s.length));
      recvs.push_back(r);
    }
  }
  for (std::size_t j = 0; j < slices; ++j) {
    // Forward each slice as soon as it is here.
    if (prev >= 0) HOOP_RETURN_IF_ERROR(wait_one(ctx.transport, recvs[j], ctx.deadline));
    if (next < 0) continue;
    const patterns::Range s = patterns::slice(whole, kSliceBytes, j);
    HOOP_ASSIGN_OR_RETURN(RequestId id, ctx.send_awaited(next, buffer + s.offset, s.length));
    sends.push_back(id);
  }
  return ctx.wait(sends);
}

}  // namespace

Status broadcast_bytes(Context& ctx, std::byte* buffer, std::size_t bytes, int root) {
  if (ctx.size == 1) return Status::success();
  if (bytes < kBroadcastChainBytes || ctx.size == 2)
    return broadcast_binomial(ctx, buffer, bytes, root);
  return broadcast_chain(ctx, buffer, bytes, root);
}

}  // namespace hoop::collectives
