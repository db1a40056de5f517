// The rooted collectives: reduce to a root, gather(v) to it, scatter(v) from it.
//
// Reduce: a binomial tree for small buffers (ceil(log2 n) whole-buffer hops into the root); for
// large ones the ring reduce-scatter (every link carries each byte about once) and then each
// rank's reduced chunk to the root. Gather and scatter: the root exchanges one message with
// every other rank, all posted at once (the transports move them concurrently); a tree would
// save latency at many ranks but forward every block log2(n) times. Except a small scatter from
// 3 ranks up, which goes down the binomial tree: its root's sends are what every rank waits
// for, one after another, and the tree leaves the root ceil(log2 n) of them.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/dispatch.h"
#include "collectives/algorithms/one_host.h"
#include "collectives/algorithms/trace.h"
#include "collectives/algorithms/validate.h"
#include "collectives/patterns/binomial.h"
#include "collectives/patterns/partition.h"

namespace hoop {
namespace {

using collectives::block_layout;
using collectives::bytes_of;
using collectives::CallFingerprint;
using collectives::Context;
using collectives::copy_in;
using collectives::run;
using collectives::run_on_device;
using collectives::Staged;

/// From this many bytes the tree's hops go in slices: below it a whole buffer in one message
/// was quicker (2 ranks over TCP: 256 KiB in one message 36 us, in four 40-44 us).
constexpr std::size_t kReduceSliceMin = std::size_t{512} << 10;
/// From this many bytes (and 3 ranks) reduce takes the ring: the tree's root link carries the
/// whole buffer log2(n) times, the ring's links about once.
constexpr std::size_t kReduceRingBytes = std::size_t{256} << 10;

Status reduce_binomial(Context& ctx, const std::byte* input, std::byte* work, std::size_t count,
                       DataType dtype, ReduceOp op, int root) {
  const std::size_t es = dtype_size(dtype);
  HOOP_ASSIGN_OR_RETURN(std::byte * tmp, ctx.scratch_buffer(1, count * es));
  const patterns::BinomialTree tree(ctx.size, root);
  const std::vector<int> children = tree.children(ctx.rank);
  // A large buffer travels in slices (the ring's: about a quarter of it, 64-512 KiB; the same on
  // both sides of each hop), each reduced as soon as it is here while the next ones arrive.
  // Received whole and then reduced, a 2-rank reduce of 1-64 MiB over TCP took 1.35-1.76x Open
  // MPI's time, which pipelines its segments.
  const patterns::Range whole{0, count};
  const std::size_t max_slice =
      count * es < kReduceSliceMin
          ? std::max<std::size_t>(count, 1)
          : std::max<std::size_t>(1, collectives::ring_slice_bytes(count * es) / es);
  const std::size_t slices = std::max<std::size_t>(1, patterns::slice_count(whole, max_slice));
  auto piece = [&](std::size_t j) {
    return slices == 1 ? whole : patterns::slice(whole, max_slice, j);
  };
  std::vector<RequestId> ids(slices);
  // This rank's partial result: its input until the first child's part is added into work (a
  // leaf sends its input as it is, with no copy).
  const std::byte* acc = input != nullptr ? input : work;
  // Nearest child first: its subtree is the shallowest, so its sum is ready first.
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    for (std::size_t j = 0; j < slices; ++j) {
      const patterns::Range s = piece(j);
      HOOP_ASSIGN_OR_RETURN(ids[j], ctx.recv(*it, tmp + s.offset * es, s.length * es));
    }
    for (std::size_t j = 0; j < slices; ++j) {
      const patterns::Range s = piece(j);
      const std::size_t at = s.offset * es;
      HOOP_RETURN_IF_ERROR(wait_one(ctx.transport, ids[j], ctx.deadline));
      HOOP_RETURN_IF_ERROR(acc == work
                               ? ctx.reduce_into(work + at, tmp + at, s.length, dtype, op)
                               : ctx.reduce(work + at, acc + at, tmp + at, s.length, dtype, op));
    }
    acc = work;
  }
  const int parent = tree.parent(ctx.rank);
  if (parent >= 0) {
    for (std::size_t j = 0; j < slices; ++j) {
      const patterns::Range s = piece(j);
      HOOP_ASSIGN_OR_RETURN(ids[j], ctx.send_awaited(parent, acc + s.offset * es, s.length * es));
    }
    return ctx.wait(ids);
  }
  HOOP_RETURN_IF_ERROR(copy_in(ctx, work, acc == work ? nullptr : acc, count * es));
  return op == ReduceOp::kAvg ? ctx.divide(work, count, dtype, ctx.size) : Status::success();
}

Status reduce_ring(Context& ctx, const std::byte* input, std::byte* work, std::size_t count,
                   DataType dtype, ReduceOp op, int root) {
  const std::size_t es = dtype_size(dtype);
  // Chunk `rank` of work ends reduced (and divided for kAvg) on each rank.
  HOOP_RETURN_IF_ERROR(collectives::ring_reduce_scatter(ctx, work, count, dtype, op,
                                                        input == work ? nullptr : input));
  const patterns::Partition chunks(count, ctx.size);
  std::vector<RequestId> ids;
  if (ctx.rank != root) {
    const patterns::Range c = chunks.chunk(ctx.rank);
    HOOP_ASSIGN_OR_RETURN(RequestId s, ctx.send_awaited(root, work + c.offset * es, c.length * es));
    ids.push_back(s);
  } else {
    for (int r = 0; r < ctx.size; ++r) {
      if (r == root) continue;
      const patterns::Range c = chunks.chunk(r);
      HOOP_ASSIGN_OR_RETURN(RequestId id, ctx.recv(r, work + c.offset * es, c.length * es));
      ids.push_back(id);
    }
  }
  return ctx.wait(ids);
}

/// Gather (`gather`) or scatter: block r (offsets[r], lengths[r] bytes) of the root's buffer
/// `blocks` comes from (goes to) rank r's `mine`. Every pair exchanges one message, empty ones
/// included, all posted at once.
Status move_blocks(Context& ctx, bool gather, std::byte* blocks, std::byte* mine,
                   std::span<const std::size_t> offsets, std::span<const std::size_t> lengths,
                   int root) {
  const int me = ctx.rank;
  std::vector<RequestId> ids;
  auto post = [&](int peer, std::byte* data, std::size_t bytes) -> Status {
    HOOP_ASSIGN_OR_RETURN(RequestId id, gather == (me == root)
                                            ? ctx.recv(peer, data, bytes)
                                            : ctx.send_awaited(peer, data, bytes));
    ids.push_back(id);
    return Status::success();
  };
  if (me != root) {
    HOOP_RETURN_IF_ERROR(post(root, mine, lengths[me]));
    return ctx.wait(ids);
  }
  for (int r = 0; r < ctx.size; ++r)
    if (r != root) HOOP_RETURN_IF_ERROR(post(r, blocks + offsets[r], lengths[r]));
  HOOP_RETURN_IF_ERROR(gather ? ctx.copy(blocks + offsets[me], mine, lengths[me])
                              : ctx.copy(mine, blocks + offsets[me], lengths[me]));
  return ctx.wait(ids);
}

/// A scatter of at most this many bytes in all (from 3 ranks) goes down the binomial tree: over
/// TCP at 4 ranks on 2 cores, Open MPI's binomial scatter took 6.4-7.4 us at 32 B where its
/// linear one took 12.4-15.4 us, and hoop's linear one 16-18 us; at 32 KiB the linear one was
/// already level with Open MPI's choice.
constexpr std::size_t kTreeScatterBytes = std::size_t{16} << 10;

/// Scatter down the binomial tree: every rank receives its subtree's blocks in relative rank
/// order, in one message from its parent (the root packs them so), keeps the first, and sends
/// each child its subtree's run. Host buffers only (the packing copies block by block).
Status scatter_binomial(Context& ctx, const std::byte* blocks, std::byte* mine,
                        std::span<const std::size_t> offsets, std::span<const std::size_t> lengths,
                        int root) {
  const patterns::BinomialTree tree(ctx.size, root);
  const int v = tree.relative(ctx.rank);
  // Bytes of the blocks of relative ranks [from, to).
  auto run_bytes = [&](int from, int to) {
    std::size_t bytes = 0;
    for (int u = from; u < to; ++u) bytes += lengths[static_cast<std::size_t>(tree.rank_of(u))];
    return bytes;
  };
  const std::size_t held = run_bytes(v, v + tree.subtree_size(ctx.rank));
  HOOP_ASSIGN_OR_RETURN(std::byte * run, ctx.scratch_buffer(1, held));
  if (v == 0) {
    std::size_t at = 0;
    for (int u = 0; u < ctx.size; ++u) {
      const auto r = static_cast<std::size_t>(tree.rank_of(u));
      HOOP_RETURN_IF_ERROR(ctx.copy(run + at, blocks + offsets[r], lengths[r]));
      at += lengths[r];
    }
  } else {
    HOOP_ASSIGN_OR_RETURN(RequestId id, ctx.recv(tree.parent(ctx.rank), run, held));
    HOOP_RETURN_IF_ERROR(wait_one(ctx.transport, id, ctx.deadline));
  }
  std::vector<RequestId> ids;
  for (int child : tree.children(ctx.rank)) {
    const int c = tree.relative(child);
    HOOP_ASSIGN_OR_RETURN(
        RequestId id,
        ctx.send_awaited(child, run + run_bytes(v, c), run_bytes(c, c + tree.subtree_size(child))));
    ids.push_back(id);
  }
  HOOP_RETURN_IF_ERROR(ctx.copy(mine, run, lengths[static_cast<std::size_t>(ctx.rank)]));
  return ctx.wait(ids);
}

/// The checks every rooted call shares: dtype and root.
Status check_rooted(DataType dtype, int root, int size) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(dtype));
  return collectives::check_root(root, size);
}

Status gatherv_as(Communicator& comm, const GathervOptions& o, Collective kind);
Status scatterv_as(Communicator& comm, const ScattervOptions& o, Collective kind);
Status gather_staged(Communicator& c, const GathervOptions& o) {
  return gatherv_as(c, o, Collective::kGather);
}
Status gatherv_staged(Communicator& c, const GathervOptions& o) {
  return gatherv_as(c, o, Collective::kGatherv);
}
Status scatter_staged(Communicator& c, const ScattervOptions& o) {
  return scatterv_as(c, o, Collective::kScatter);
}
Status scatterv_staged(Communicator& c, const ScattervOptions& o) {
  return scatterv_as(c, o, Collective::kScatterv);
}

/// The fingerprint of a gather or scatter: the per-rank count, or for the v-forms the total and
/// a hash of the counts.
CallFingerprint blocks_fingerprint(Collective kind, DataType dtype, int root,
                                   std::span<const std::size_t> counts, std::size_t total) {
  CallFingerprint fp{.kind = kind, .dtype = dtype, .root = root};
  const bool v = kind == Collective::kGatherv || kind == Collective::kScatterv;
  fp.count = v || counts.empty() ? total : counts[0];
  if (v) fp.counts_hash = collectives::hash_counts(counts);
  return fp;
}

/// "gather of 12 f32 to rank 0": a gather's or scatter's description in its errors.
std::string describe_blocks(Collective kind, std::size_t total, DataType dtype, int root) {
  const bool gather = kind == Collective::kGather || kind == Collective::kGatherv;
  return fmt::format("{} of {} {} {} rank {}", collective_name(kind), total, dtype_name(dtype),
                     gather ? "to" : "from", root);
}

/// Where a gather or scatter runs on one host: `reading` (move_by_reading, larger blocks read
/// where they lie) or `slots` (blocks_in_slots, a small call in one step, its largest slot
/// payload `slot_bytes`), each null where it does not apply. The same decision on every rank:
/// `largest` is the largest block (the gather's root reads them all), `root_bytes` the root's
/// whole buffer (the scatter's root publishes it).
struct OneHostRoute {
  collectives::CommImpl* reading = nullptr;
  collectives::CommImpl* slots = nullptr;
  std::size_t slot_bytes = 0;
};
[[gnu::always_inline]] inline OneHostRoute one_host_route(Communicator& comm, bool gather,
                                                          bool is_root, const void* mine,
                                                          const void* blocks, std::size_t largest,
                                                          std::size_t root_bytes) {
  auto* one_host =
      collectives::in_slots(comm, 0, false,
                            {{mine, gather ? "input" : "output"},
                             {is_root ? blocks : nullptr, gather ? "output" : "input"}});
  if (one_host == nullptr) return {};
  const std::size_t slot_bytes = gather ? largest : root_bytes;
  const bool fits = collectives::slots_for(*one_host, slot_bytes, gather) != nullptr;
  const std::size_t root_total =
      gather ? largest * static_cast<std::size_t>(one_host->size()) : root_bytes;
  if (!(fits && collectives::slots_before_reads(*one_host, root_total)) &&
      collectives::reads_take_moves(*one_host, largest, gather))
    return {.reading = one_host};
  if (!fits) return {};
  return {.slots = one_host, .slot_bytes = slot_bytes};
}

/// gather(v) (Options = GathervOptions) or scatter(v) (ScattervOptions): the root's buffer of
/// every block is the gather's output and the scatter's input; this rank's block the other one.
/// In place on the root: its own block stays in the root's buffer (input or output null).
template <typename Options>
Status blocks_as(Communicator& comm, const Options& o, Collective kind,
                 Status (*staged_self)(Communicator&, const Options&)) {
  constexpr bool gather = std::is_same_v<Options, GathervOptions>;
  HOOP_RETURN_IF_ERROR(check_rooted(o.dtype, o.root, comm.size()));
  HOOP_ASSIGN_OR_RETURN(std::size_t total,
                        collectives::check_counts(o.counts, comm.size(), o.dtype, "counts"));
  const std::size_t es = dtype_size(o.dtype);
  const collectives::Trace trace(comm, kind, total * es);
  const int me = comm.rank();
  const bool is_root = me == o.root;
  collectives::RankSizes offsets_of(o.counts.size(), 0);
  collectives::RankSizes lengths_of(o.counts.size(), 0);
  const std::span<std::size_t> offsets = offsets_of.span();
  const std::span<std::size_t> lengths = lengths_of.span();
  block_layout(o.counts, es, offsets, lengths);
  // The gather writes the root's buffer and reads this rank's; the scatter the other way.
  const void* blocks = gather ? static_cast<const void*>(o.output) : o.input;
  const void* mine = gather ? o.input : static_cast<const void*>(o.output);
  const char* blocks_name = gather ? "output" : "input";
  if (is_root) {
    HOOP_RETURN_IF_ERROR(collectives::check_buffer(blocks, total, blocks_name));
    if (mine == nullptr) mine = bytes_of(blocks) + offsets[me];  // in place
  }
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(mine, o.counts[me], gather ? "input" : "output"));
  auto what = [&] { return describe_blocks(kind, total, o.dtype, o.root); };
  const CallFingerprint fp = blocks_fingerprint(kind, o.dtype, o.root, o.counts, total);
  const std::size_t largest =
      lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  const OneHostRoute route =
      one_host_route(comm, gather, is_root, mine, blocks, largest, total * es);
  // Larger blocks are read where they lie, one copy each (one_host.h).
  if (route.reading != nullptr) {
    auto* root_blocks = const_cast<std::byte*>(bytes_of(blocks));
    auto* own = const_cast<std::byte*>(bytes_of(mine));
    // Each block moves in two parts at once (root_share): the root moves the first part of
    // every other rank's block (a gather's root reads it, a scatter's root writes it), and that
    // rank the rest (a gather's giver writes it into the root's output, a scatter's receiver
    // reads it). The root publishes its buffer of every block, the others their own block.
    auto root_part = [&](std::size_t r) {
      return collectives::root_share(lengths[r], comm.size());
    };
    return collectives::move_by_reading(
        *route.reading, fp, {is_root ? blocks : mine}, what,
        [&](SharedSlots& slots, std::span<const std::uint64_t> at) -> Status {
          const auto m = static_cast<std::size_t>(me);
          if (is_root) {
            // In place, the root's own block is where it belongs already.
            if (lengths[m] > 0 && own != root_blocks + offsets[m])
              std::memmove(gather ? root_blocks + offsets[m] : own,
                           gather ? own : root_blocks + offsets[m], lengths[m]);
            for (std::size_t r = 0; r < at.size(); ++r) {
              const std::size_t head = root_part(r);
              if (r == m || head == 0) continue;
              auto* theirs = reinterpret_cast<std::byte*>(at[r]);
              std::byte* local = root_blocks + offsets[r];
              HOOP_RETURN_IF_ERROR(
                  gather ? slots.read_peer(static_cast<int>(r), theirs, local, head)
                         : slots.write_peer(static_cast<int>(r), local, theirs, head));
            }
            return Status::success();
          }
          const std::size_t head = root_part(m);
          if (lengths[m] == head) return Status::success();
          auto* at_root = reinterpret_cast<std::byte*>(at[static_cast<std::size_t>(o.root)]) +
                          offsets[m] + head;
          return gather ? slots.write_peer(o.root, own + head, at_root, lengths[m] - head)
                        : slots.read_peer(o.root, at_root, own + head, lengths[m] - head);
        });
  }
  if (route.slots != nullptr)
    return collectives::blocks_in_slots(
        *route.slots, fp, gather, const_cast<std::byte*>(bytes_of(blocks)),
        const_cast<std::byte*>(bytes_of(mine)), offsets, lengths, o.root, route.slot_bytes, what);
  collectives::DevicePart* part = nullptr;
  const std::size_t root_bytes = is_root ? total * es : 0;
  const void* root_buf = is_root ? blocks : nullptr;
  const Staged staged = gather ? Staged{mine, lengths[me], const_cast<void*>(root_buf), root_bytes}
                               : Staged{root_buf, root_bytes, const_cast<void*>(mine), lengths[me]};
  if (auto done = run_on_device(comm, o, collectives::route_call_of(kind, o.dtype, total * es), &fp,
                                what, staged_self, nullptr, staged, part))
    return *done;
  return run(
      comm, fp, what,
      [&](Context& ctx) {
        if (!gather && comm.size() >= 3 && total * es <= kTreeScatterBytes &&
            ctx.device == kCpuDevice) {
          return scatter_binomial(ctx, bytes_of(blocks), const_cast<std::byte*>(bytes_of(mine)),
                                  offsets, lengths, o.root);
        }
        return move_blocks(ctx, gather, const_cast<std::byte*>(bytes_of(blocks)),
                           const_cast<std::byte*>(bytes_of(mine)), offsets, lengths, o.root);
      },
      part);
}

/// A gather's or scatter's options as its v-form's, with `counts` (`count` for every rank).
template <typename V, typename O>
V as_v(const O& o, std::span<const std::size_t> counts) {
  return V{
      .input = o.input, .output = o.output, .counts = counts, .dtype = o.dtype, .root = o.root};
}

/// `count` for every rank: gather and scatter as their v-forms.
collectives::RankSizes uniform_counts(const Communicator& comm, std::size_t count) {
  return collectives::RankSizes(static_cast<std::size_t>(std::max(comm.size(), 0)), count);
}

/// A gather (Options = GatherOptions) or scatter (ScatterOptions) of equal blocks that
/// blocks_as would run through the shared slots, run there without the v-form: its counts, their
/// checks and its layout cost an 8 B scatter at 2 ranks a quarter of its instructions. Nullopt
/// where the call takes another path, or where an argument is wrong: blocks_as then names it.
/// one_host_route decides for both, so every rank picks as blocks_as would.
template <typename Options>
std::optional<Status> equal_blocks_in_slots(Communicator& comm, const Options& o) {
  constexpr bool gather = std::is_same_v<Options, GatherOptions>;
  constexpr Collective kind = gather ? Collective::kGather : Collective::kScatter;
  auto* impl = collectives::impl_of(comm);
  if (impl == nullptr || impl->slots() == nullptr) return std::nullopt;
  const int n = comm.size();
  const int me = comm.rank();
  const bool is_root = me == o.root;
  if (!check_rooted(o.dtype, o.root, n).ok()) return std::nullopt;
  const Result<std::size_t> total_bytes =
      collectives::checked_bytes(o.count, static_cast<std::size_t>(n), o.dtype, "count");
  if (!total_bytes.ok()) return std::nullopt;
  const std::size_t es = dtype_size(o.dtype);
  const std::size_t block = o.count * es;
  const void* blocks = gather ? static_cast<const void*>(o.output) : o.input;
  const void* mine = gather ? o.input : static_cast<const void*>(o.output);
  if (is_root) {
    if (blocks == nullptr && o.count > 0) return std::nullopt;
    if (mine == nullptr) mine = bytes_of(blocks) + block * static_cast<std::size_t>(me);
  }
  if (mine == nullptr && o.count > 0) return std::nullopt;
  const OneHostRoute route =
      one_host_route(comm, gather, is_root, mine, blocks, block, *total_bytes);
  if (route.slots == nullptr) return std::nullopt;
  const collectives::Trace trace(comm, kind, *total_bytes);
  const collectives::UniformBlocks layout(static_cast<std::size_t>(n), o.count, es);
  const std::size_t total = o.count * static_cast<std::size_t>(n);
  return collectives::blocks_in_slots(
      *route.slots, blocks_fingerprint(kind, o.dtype, o.root, {}, o.count), gather,
      const_cast<std::byte*>(bytes_of(blocks)), const_cast<std::byte*>(bytes_of(mine)),
      layout.offsets(), layout.lengths(), o.root, route.slot_bytes,
      [&] { return describe_blocks(kind, total, o.dtype, o.root); });
}

Status gatherv_as(Communicator& comm, const GathervOptions& o, Collective kind) {
  return blocks_as(comm, o, kind, kind == Collective::kGather ? &gather_staged : &gatherv_staged);
}

Status scatterv_as(Communicator& comm, const ScattervOptions& o, Collective kind) {
  return blocks_as(comm, o, kind,
                   kind == Collective::kScatter ? &scatter_staged : &scatterv_staged);
}

}  // namespace

Status reduce(Communicator& comm, const RootReduceOptions& given) {
  RootReduceOptions o = given;
  HOOP_RETURN_IF_ERROR(check_rooted(o.dtype, o.root, comm.size()));
  HOOP_RETURN_IF_ERROR(collectives::check_op(o.op));
  HOOP_ASSIGN_OR_RETURN(std::size_t bytes,
                        collectives::checked_bytes(o.count, 1, o.dtype, "count"));
  const collectives::Trace trace(comm, Collective::kReduce, bytes);
  const bool is_root = comm.rank() == o.root;
  if (is_root) {
    HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.output, o.count, "output"));
    if (o.input == nullptr) o.input = o.output;  // in place
  }
  HOOP_RETURN_IF_ERROR(collectives::check_buffer(o.input, o.count, "input"));
  auto what = [&] {
    return fmt::format("reduce of {} {} ({}) to rank {}", o.count, dtype_name(o.dtype),
                       op_name(o.op), o.root);
  };
  auto* one_host = collectives::in_slots(
      comm, 0, false, {{o.input, "input"}, {is_root ? o.output : nullptr, "output"}});
  // On one host a small reduce is one step: the root reduces every rank's slot in rank order.
  if (one_host != nullptr && collectives::slots_for(*one_host, bytes, true) != nullptr)
    return collectives::reduce_in_slots(*one_host, o, bytes, what);
  // Past the slots, two ranks on one host: the root reads the other's input where it lies.
  if (one_host != nullptr && collectives::reads_take_reduce(*one_host, bytes))
    return collectives::reduce_by_reading(*one_host, o, what);
  collectives::DevicePart* part = nullptr;
  const Staged staged{o.input, bytes, is_root ? o.output : nullptr, is_root ? bytes : 0};
  const CallFingerprint fp{
      .kind = Collective::kReduce, .dtype = o.dtype, .op = o.op, .root = o.root, .count = o.count};
  if (auto done = run_on_device(
          comm, o, collectives::route_call_of(Collective::kReduce, o.dtype, bytes, o.op), &fp, what,
          &reduce, nullptr, staged, part))
    return *done;
  return run(
      comm, fp, what,
      [&](Context& ctx) -> Status {
        const std::byte* in = bytes_of(o.input);
        if (ctx.size == 1) return ctx.copy(o.output, in, bytes);
        // Only the root has an output; the others reduce in scratch: slot 0 beside the tree's
        // receive buffer in slot 1, slot 1 beside the ring's staging in slot 0.
        const bool tree = bytes < kReduceRingBytes || ctx.size == 2;
        std::byte* work = bytes_of(o.output);
        if (!is_root) {
          HOOP_ASSIGN_OR_RETURN(work, ctx.scratch_buffer(tree ? 0 : 1, bytes));
        }
        if (tree) return reduce_binomial(ctx, in, work, o.count, o.dtype, o.op, o.root);
        return reduce_ring(ctx, in, work, o.count, o.dtype, o.op, o.root);
      },
      part);
}

Status gather(Communicator& comm, const GatherOptions& o) {
  if (std::optional<Status> done = equal_blocks_in_slots(comm, o)) return *done;
  const collectives::RankSizes counts = uniform_counts(comm, o.count);
  return gatherv_as(comm, as_v<GathervOptions>(o, counts.span()), Collective::kGather);
}

Status gatherv(Communicator& comm, const GathervOptions& o) {
  return gatherv_as(comm, o, Collective::kGatherv);
}

Status scatter(Communicator& comm, const ScatterOptions& o) {
  if (std::optional<Status> done = equal_blocks_in_slots(comm, o)) return *done;
  const collectives::RankSizes counts = uniform_counts(comm, o.count);
  return scatterv_as(comm, as_v<ScattervOptions>(o, counts.span()), Collective::kScatter);
}

Status scatterv(Communicator& comm, const ScattervOptions& o) {
  return scatterv_as(comm, o, Collective::kScatterv);
}

}  // namespace hoop
