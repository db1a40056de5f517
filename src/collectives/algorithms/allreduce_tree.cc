// NCCL-style double binary tree allreduce, pipelined (patterns::DoubleBinaryTree).
//
// Half t of the buffer (DoubleBinaryTree::half) is reduced up tree t to its root and broadcast
// back down, cut into slices of at most kTreeSliceBytes. Both trees run at once, so every rank
// sends and receives on both of its trees' links in each direction.
//
// Schedule: a systolic lockstep. With H_t the depth of tree t and d a rank's depth in it, the
// rank reduces slice j of tree t at step j + H_t - d (children first: the root at j + H_t) and
// broadcasts it at step j + H_t + d (the root right after its reduction, in the same step).
// Every message is therefore sent at step s and consumed at step s + 1, so a rank's waits in
// step s depend only on what its neighbours did in step s - 1: no rank ever blocks on a chain
// of hops within one step (which would serialise the pipeline), and no cycle of waits exists.
// Receives for step s + 1 are posted at the start of step s, so two slices per link are in
// flight while a rank reduces.
//
// Matching: the transport matches per pair in FIFO order. Within one step every rank posts in
// the order tree 0, tree 1 (reduce before broadcast), and receives are posted grouped by the
// step their sender sends them in, in the same tree order; on one link and one tree only one
// kind of message travels (a peer is either the parent or a child), so both ends agree.
//
// Bit-identical results: the root of each tree holds the final reduction of its half (and
// divides it for kAvg) and only copies of its bits travel down.
#include <algorithm>
#include <array>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/patterns/partition.h"
#include "collectives/patterns/tree.h"

namespace hoop::collectives {
namespace {

constexpr int kTrees = patterns::DoubleBinaryTree::kTrees;

int depth_of(const patterns::DoubleBinaryTree& trees, int rank, int tree) {
  int depth = 0;
  for (int p = trees.links(rank, tree).parent; p >= 0; p = trees.links(p, tree).parent) ++depth;
  return depth;
}

/// One rank's view of one tree for this call.
struct TreeState {
  patterns::TreeLinks links;
  patterns::Range half;
  std::size_t slices = 0;
  int height = 0;  // the tree's depth H (every rank computes the same value)
  int depth = 0;   // this rank's depth d
  // Receives from each child, by the parity of the step that consumes them.
  std::array<std::array<RequestId, 2>, 2> child_recv{};
  std::array<RequestId, 2> parent_recv{};
  // The send of slice j up to the parent: the broadcast later receives into the same elements,
  // so it must have completed first.
  std::vector<RequestId> up_send;
  std::vector<bool> up_pending;

  /// The slice reduced (or broadcast) at `step`, or -1 when there is none.
  long reduce_slice(long step) const { return in_range(step - (height - depth)); }
  long bcast_slice(long step) const { return in_range(step - (height + depth)); }
  long in_range(long j) const { return j >= 0 && j < static_cast<long>(slices) ? j : -1; }
};

/// One rank's double-tree pipeline for one call: the trees' state, the staging slots of the
/// children's slices, and the steps as named phases (posting a step's receives, the reduction
/// going up and the broadcast coming down of each tree).
class TreePipeline {
 public:
  TreePipeline(Context& ctx, std::byte* work, std::size_t count, DataType dtype, ReduceOp op)
      : ctx_(ctx),
        work_(work),
        dtype_(dtype),
        op_(op),
        es_(dtype_size(dtype)),
        max_slice_(std::max<std::size_t>(1, kTreeSliceBytes / es_)) {
    const patterns::DoubleBinaryTree trees(ctx.size);
    for (int t = 0; t < kTrees; ++t) {
      TreeState& ts = tree_[t];
      ts.links = trees.links(ctx.rank, t);
      ts.half = patterns::DoubleBinaryTree::half(count, t);
      ts.slices = patterns::slice_count(ts.half, max_slice_);
      ts.depth = depth_of(trees, ctx.rank, t);
      for (int r = 0; r < ctx.size; ++r) ts.height = std::max(ts.height, depth_of(trees, r, t));
      ts.up_send.assign(ts.slices, 0);
      ts.up_pending.assign(ts.slices, false);
      // The last event is the broadcast of the last slice at the deepest rank.
      if (ts.slices > 0)
        total_steps_ = std::max(total_steps_, static_cast<long>(ts.slices) + 2L * ts.height);
    }
  }

  Status run() {
    // Staging for the children's slices: [tree][child][parity], each one slice long. Half 0
    // is the longer one, so its first slice is the longest of all.
    slot_bytes_ = std::min(max_slice_, tree_[0].half.length) * es_;
    HOOP_ASSIGN_OR_RETURN(staging_,
                          ctx_.scratch_buffer(0, std::size_t{kTrees} * 2 * 2 * slot_bytes_));
    HOOP_RETURN_IF_ERROR(post_receives(0));
    for (long step = 0; step < total_steps_; ++step) {
      if (step + 1 < total_steps_) HOOP_RETURN_IF_ERROR(post_receives(step + 1));
      for (int t = 0; t < kTrees; ++t) {
        if (long j = tree_[t].reduce_slice(step); j >= 0)
          HOOP_RETURN_IF_ERROR(reduce_up(t, j, step));
        if (long j = tree_[t].bcast_slice(step); j >= 0)
          HOOP_RETURN_IF_ERROR(broadcast_down(t, j, step));
      }
    }
    // Every up-send was waited for before its broadcast receive; only the down-sends remain.
    return ctx_.wait(down_sends_);
  }

 private:
  std::byte* slot(int t, int child, long step) const {
    return staging_ + ((static_cast<std::size_t>(t) * 2 + child) * 2 + step % 2) * slot_bytes_;
  }
  patterns::Range slice_at(int t, long j) const {
    return patterns::slice(tree_[t].half, max_slice_, static_cast<std::size_t>(j));
  }

  /// Posts the receives consumed at `step`, i.e. sent by the neighbours at step - 1.
  Status post_receives(long step) {
    for (int t = 0; t < kTrees; ++t) {
      TreeState& ts = tree_[t];
      if (long j = ts.reduce_slice(step); j >= 0) {
        const patterns::Range s = slice_at(t, j);
        for (int c = 0; c < ts.links.num_children(); ++c) {
          HOOP_ASSIGN_OR_RETURN(ts.child_recv[c][step % 2],
                                ctx_.recv(ts.links.children[c], slot(t, c, step), s.length * es_));
        }
      }
      if (long j = ts.bcast_slice(step); j >= 0 && ts.links.parent >= 0) {
        if (ts.up_pending[j]) {
          HOOP_RETURN_IF_ERROR(wait_one(ctx_.transport, ts.up_send[j], ctx_.deadline));
          ts.up_pending[j] = false;
        }
        const patterns::Range s = slice_at(t, j);
        HOOP_ASSIGN_OR_RETURN(ts.parent_recv[step % 2],
                              ctx_.recv(ts.links.parent, work_ + s.offset * es_, s.length * es_));
      }
    }
    return Status::success();
  }

  /// Reduces the children's slice j of tree t into this rank's and sends it up (the root
  /// divides it for kAvg instead).
  Status reduce_up(int t, long j, long step) {
    TreeState& ts = tree_[t];
    const patterns::Range s = slice_at(t, j);
    std::byte* dst = work_ + s.offset * es_;
    for (int c = 0; c < ts.links.num_children(); ++c) {
      HOOP_RETURN_IF_ERROR(wait_one(ctx_.transport, ts.child_recv[c][step % 2], ctx_.deadline));
      HOOP_RETURN_IF_ERROR(ctx_.reduce_into(dst, slot(t, c, step), s.length, dtype_, op_));
    }
    if (ts.links.parent >= 0) {
      HOOP_ASSIGN_OR_RETURN(ts.up_send[j], ctx_.send(ts.links.parent, dst, s.length * es_));
      ts.up_pending[j] = true;
    } else if (op_ == ReduceOp::kAvg) {
      // The root holds the complete sum of this slice: divide once, before it goes down.
      HOOP_RETURN_IF_ERROR(ctx_.divide(dst, s.length, dtype_, ctx_.size));
    }
    return Status::success();
  }

  /// Takes slice j of tree t from the parent (the root has it) and sends it to the children.
  Status broadcast_down(int t, long j, long step) {
    const TreeState& ts = tree_[t];
    const patterns::Range s = slice_at(t, j);
    if (ts.links.parent >= 0)
      HOOP_RETURN_IF_ERROR(wait_one(ctx_.transport, ts.parent_recv[step % 2], ctx_.deadline));
    for (int c = 0; c < ts.links.num_children(); ++c) {
      HOOP_ASSIGN_OR_RETURN(
          RequestId id, ctx_.send(ts.links.children[c], work_ + s.offset * es_, s.length * es_));
      down_sends_.push_back(id);
    }
    return Status::success();
  }

  Context& ctx_;
  std::byte* work_;
  DataType dtype_;
  ReduceOp op_;
  std::size_t es_;
  std::size_t max_slice_;
  std::array<TreeState, kTrees> tree_;
  long total_steps_ = 0;
  std::size_t slot_bytes_ = 0;
  std::byte* staging_ = nullptr;
  std::vector<RequestId> down_sends_;
};

}  // namespace

Status allreduce_tree(Context& ctx, std::byte* work, std::size_t count, DataType dtype,
                      ReduceOp op) {
  if (ctx.size == 1) return Status::success();  // kAvg divides by 1: nothing to do
  return TreePipeline(ctx, work, count, dtype, op).run();
}

}  // namespace hoop::collectives
