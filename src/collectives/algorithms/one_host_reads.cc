// The one-host paths that read the other ranks' buffers where they lie (one_host.h):
// the single-copy allreduce and reduce, and the collectives that only move bytes.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/algorithms/dispatch.h"
#include "collectives/algorithms/one_host.h"
#include "collectives/patterns/partition.h"
#include "core/reduce.h"

namespace hoop::collectives {
namespace {

// From this size reading the peers' memory beats the rings at every size measured, to 64 MiB
// (bench: docs/BENCHMARKS.md, "Shared slots"); below it the slots are quicker than three meets
// and a system call per peer.
constexpr std::size_t kReadMin = std::size_t{64} << 10;
// From this many bytes per block the collectives that only move blocks (gather, scatter,
// alltoall) read them where they lie rather than through the slots, which copy each block
// twice (in, out): at 32 KiB the slots took 1.3-1.5x Open MPI's vader, which copies once
// (docs/BENCHMARKS.md, "Rooted collectives and the exchanges in the shared slots").
constexpr std::size_t kReadMoveMin = std::size_t{32} << 10;
// A gather moves its blocks where they lie up to this size per block: past it the messages,
// whose sender copies into the ring while the root copies out, won when the root alone read
// every block (gather of 2 MiB blocks: 0.82x vader's time by messages, 1.07x by reading), and
// were as fast once the givers wrote most of their blocks themselves (4-64 MiB at 2 and 4
// ranks: 0.61-1.36x either way, 6 pairs).
constexpr std::size_t kRootReadsMax = std::size_t{2} << 20;
// A gather's or scatter's root buffer up to which a crowded job whose reads are slow takes the
// slots before reading (slots_before_reads).
constexpr std::size_t kCrowdedRootSlotsMax = std::size_t{1} << 20;
// Elements reduced per pass: the running sum and one peer's piece stay in the L2 cache. 256 KiB
// pieces took 0.82-0.95x the time of 64 KiB ones in 2-rank reads from 512 KiB to 8 MiB (fewer
// cross-memory calls); 512 KiB ones were as fast from 1 MiB and 1.46x slower at 512 KiB.
constexpr std::size_t kReadPieceBytes = std::size_t{256} << 10;
// A 2-rank reduce by reading splits the work: the root reduces the first 7/10 of the elements
// (it reads the other rank's input and reduces into its output), the other rank the rest,
// which it also has to write into the root's output, a copy more per element. 7/10 balanced
// best (2-rank reduce, 512 KiB-16 MiB: 0.63-0.75x the time of the root alone at 13/20, and
// 7/10 another 0.8-0.93x from 512 KiB to 4 MiB; 39/50 was slower from 4 MiB).
constexpr std::size_t kRootShareMul = 7;
constexpr std::size_t kRootShareDiv = 10;
// At most this many addresses a rank publishes in move_by_reading.
constexpr std::size_t kMaxPublished = 4;

/// What a rank publishes for allreduce_by_reading: how many buffers it has and where their
/// list is, and the one buffer itself when there is only one (no read of the list then).
struct Published {
  std::uint64_t buffers;
  std::uint64_t list;
  std::uint64_t input;
  std::uint64_t output;
};

/// Where one rank's buffers of a single-copy call lie: the buffers in order (inputs resolved)
/// and the element each begins at.
class Layout {
 public:
  Layout() = default;
  explicit Layout(std::vector<AllreduceBuffer> buffers) : buffers_(std::move(buffers)) {
    starts_.reserve(buffers_.size() + 1);
    std::size_t at = 0;
    for (AllreduceBuffer& b : buffers_) {
      if (b.input == nullptr) b.input = b.output;
      starts_.push_back(at);
      at += b.count;
    }
    starts_.push_back(at);
  }

  /// Whether some buffer is its own input.
  bool in_place() const {
    return std::any_of(buffers_.begin(), buffers_.end(),
                       [](const AllreduceBuffer& b) { return b.input == b.output; });
  }

  /// Calls f(buffer, its first element in range, count, offset in range) for each part of the
  /// elements [lo, hi), in order, until one fails.
  template <class F>
  Status parts(std::size_t lo, std::size_t hi, F&& f) const {
    auto i = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), lo) -
                                      starts_.begin() - 1);
    for (; i < buffers_.size() && starts_[i] < hi; ++i) {
      const std::size_t from = std::max(lo, starts_[i]);
      const std::size_t to = std::min(hi, starts_[i + 1]);
      if (from < to) HOOP_RETURN_IF_ERROR(f(buffers_[i], from - starts_[i], to - from, from - lo));
    }
    return Status::success();
  }

  /// The memory of elements [lo, hi) of the inputs (or the outputs), `es` bytes each, in order.
  void memory(std::size_t lo, std::size_t hi, std::size_t es, bool outputs,
              std::vector<MemoryPiece>& out) const {
    out.clear();
    (void)parts(lo, hi,
                [&](const AllreduceBuffer& b, std::size_t first, std::size_t count, std::size_t) {
                  const void* base = outputs ? b.output : b.input;
                  out.push_back({reinterpret_cast<std::uintptr_t>(base) + first * es, count * es});
                  return Status::success();
                });
  }

 private:
  std::vector<AllreduceBuffer> buffers_;
  std::vector<std::size_t> starts_;
};

/// A rank's Layout from what it published (its list read from its memory when it has several
/// buffers).
Result<Layout> peer_layout(SharedSlots& slots, int peer, const Published& p, std::size_t count) {
  if (p.buffers == 1)
    return Layout(
        {{reinterpret_cast<const void*>(p.input), reinterpret_cast<void*>(p.output), count}});
  std::vector<AllreduceBuffer> list(p.buffers);
  HOOP_RETURN_IF_ERROR(slots.read_peer(peer, reinterpret_cast<const void*>(p.list), list.data(),
                                       list.size() * sizeof(AllreduceBuffer)));
  return Layout(std::move(list));
}

}  // namespace

bool reads_take_allreduce(CommImpl& impl, std::size_t bytes) {
  SharedSlots* s = impl.slots();
  return s != nullptr && s->can_read_peers() && bytes >= kReadMin &&
         s->slot_bytes() >= kSlotOverhead + sizeof(Published);
}

namespace {

/// Elements `range` of every rank's input (rank r's laid out as at[r]), reduced in rank order
/// into this rank's outputs (and divided for kAvg), piece by piece so that the pieces stay in
/// the L2 cache.
Status reduce_by_reading_range(CommImpl& impl, std::span<const Layout> at, patterns::Range range,
                               DataType dtype, ReduceOp op) {
  SharedSlots& slots = *impl.slots();
  const int n = impl.size();
  const int me = impl.rank();
  const Layout& mine = at[static_cast<std::size_t>(me)];
  const std::size_t es = dtype_size(dtype);
  const std::size_t piece = std::max<std::size_t>(1, kReadPieceBytes / es);
  std::byte* scratch = impl.scratch().get(0, 3 * piece * es);
  std::byte* got[2] = {scratch + piece * es, scratch + 2 * piece * es};
  // The result goes straight into the outputs unless one is this rank's input and ranks before
  // this one are added into it first (in place, rank 2 and up): then through `scratch`.
  const bool direct = me < 2 || !mine.in_place();
  // Ranks 0 and 1 give the first reduction's operands. Where this rank is one of them and no
  // output is its input, the other's piece is read straight into the outputs and reduced there
  // (out = own op out, in rank order): the outputs' lines are in the cache when the reduction
  // writes them, where a scratch piece would leave them to be fetched (0.74-0.87x the time of a
  // 2-rank reduce from 512 KiB to 8 MiB).
  const bool into_outputs = me < 2 && n >= 2 && !mine.in_place();
  std::vector<MemoryPiece> remote;
  std::vector<MemoryPiece> local;
  for (std::size_t first = 0; first < range.length; first += piece) {
    const std::size_t lo = range.offset + first;
    const std::size_t hi = lo + std::min(piece, range.length - first);
    // Rank r's elements [lo, hi): read into `buf` from another rank; null for this rank's own,
    // taken where they lie.
    auto operand = [&](int r, std::byte* buf) -> Result<const std::byte*> {
      if (r == me) return nullptr;
      at[static_cast<std::size_t>(r)].memory(lo, hi, es, false, remote);
      const MemoryPiece into{reinterpret_cast<std::uintptr_t>(buf), (hi - lo) * es};
      HOOP_RETURN_IF_ERROR(slots.read_peer_pieces(r, remote, {&into, 1}));
      return static_cast<const std::byte*>(buf);
    };
    auto at_offset = [&](const std::byte* read, const AllreduceBuffer& b, std::size_t i,
                         std::size_t off) {
      return read != nullptr ? read + off * es : static_cast<const std::byte*>(b.input) + i * es;
    };
    auto dst = [&](const AllreduceBuffer& b, std::size_t i, std::size_t off) {
      return direct ? static_cast<std::byte*>(b.output) + i * es : scratch + off * es;
    };
    if (into_outputs) {
      const int other = 1 - me;
      at[static_cast<std::size_t>(other)].memory(lo, hi, es, false, remote);
      mine.memory(lo, hi, es, true, local);
      HOOP_RETURN_IF_ERROR(slots.read_peer_pieces(other, remote, local));
      HOOP_RETURN_IF_ERROR(mine.parts(
          lo, hi, [&](const AllreduceBuffer& x, std::size_t i, std::size_t count, std::size_t) {
            auto* out = static_cast<std::byte*>(x.output) + i * es;
            const auto* own = static_cast<const std::byte*>(x.input) + i * es;
            return me == 0 ? reduce(out, own, out, count, dtype, op)
                           : reduce(out, out, own, count, dtype, op);
          }));
    } else {
      HOOP_ASSIGN_OR_RETURN(const std::byte* a, operand(0, got[0]));
      HOOP_ASSIGN_OR_RETURN(const std::byte* b, operand(1, got[1]));
      HOOP_RETURN_IF_ERROR(mine.parts(
          lo, hi, [&](const AllreduceBuffer& x, std::size_t i, std::size_t count, std::size_t off) {
            return reduce(dst(x, i, off), at_offset(a, x, i, off), at_offset(b, x, i, off), count,
                          dtype, op);
          }));
    }
    for (int r = 2; r < n; ++r) {
      HOOP_ASSIGN_OR_RETURN(const std::byte* c, operand(r, got[0]));
      HOOP_RETURN_IF_ERROR(mine.parts(
          lo, hi, [&](const AllreduceBuffer& x, std::size_t i, std::size_t count, std::size_t off) {
            return reduce_into(dst(x, i, off), at_offset(c, x, i, off), count, dtype, op);
          }));
    }
    HOOP_RETURN_IF_ERROR(mine.parts(
        lo, hi, [&](const AllreduceBuffer& x, std::size_t i, std::size_t count, std::size_t off) {
          Status s =
              op == ReduceOp::kAvg ? divide(dst(x, i, off), count, dtype, n) : Status::success();
          if (s.ok() && !direct)
            std::memcpy(static_cast<std::byte*>(x.output) + i * es, dst(x, i, off), count * es);
          return s;
        }));
  }
  return Status::success();
}

}  // namespace

Status allreduce_by_reading(CommImpl& impl, std::span<const AllreduceBuffer> buffers,
                            std::size_t count, DataType dtype, ReduceOp op,
                            const std::function<std::string()>& what) {
  impl.async().drain();
  const std::uint64_t call = impl.next_call();
  const Deadline deadline = coarse_now() + impl.timeout();
  const CallFingerprint fp = allreduce_fingerprint(count, dtype, op);
  SharedSlots& slots = *impl.slots();
  const int n = impl.size();
  const int me = impl.rank();
  const std::size_t es = dtype_size(dtype);
  const patterns::Partition part(count, n);
  auto run = [&]() -> Status {
    const AllreduceBuffer one = buffers.size() == 1 ? buffers.front() : AllreduceBuffer{};
    const Published mine{
        buffers.size(), reinterpret_cast<std::uintptr_t>(buffers.data()),
        reinterpret_cast<std::uintptr_t>(one.input != nullptr ? one.input : one.output),
        reinterpret_cast<std::uintptr_t>(one.output)};
    HOOP_RETURN_IF_ERROR(meet_in_slots(impl, fp, &mine, sizeof mine, deadline));
    // The slots are rewritten by the next meet: keep what they say.
    std::vector<Published> published(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r)
      std::memcpy(&published[r], impl.slot_payloads()[r], sizeof(Published));
    std::vector<Layout> at(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      if (r == me) {
        at[r] = Layout(std::vector<AllreduceBuffer>(buffers.begin(), buffers.end()));
      } else {
        HOOP_ASSIGN_OR_RETURN(at[r], peer_layout(slots, r, published[r], count));
      }
    }
    // Phase 1: this rank's chunk, reduced from every rank's input in rank order.
    HOOP_RETURN_IF_ERROR(reduce_by_reading_range(impl, at, part.chunk(me), dtype, op));
    // Every chunk is final and no rank reads an input any more.
    HOOP_RETURN_IF_ERROR(meet_in_slots(impl, fp, nullptr, 0, deadline));
    // Phase 2: the other ranks' chunks, read from their outputs into this rank's.
    std::vector<MemoryPiece> remote;
    std::vector<MemoryPiece> local;
    for (int r = 0; r < n; ++r) {
      const patterns::Range c = part.chunk(r);
      if (r == me || c.length == 0) continue;
      at[r].memory(c.offset, c.offset + c.length, es, true, remote);
      at[me].memory(c.offset, c.offset + c.length, es, true, local);
      HOOP_RETURN_IF_ERROR(slots.read_peer_pieces(r, remote, local));
    }
    // No rank returns (and lets its caller change the output) while another still reads it.
    return meet_in_slots(impl, fp, nullptr, 0, deadline);
  };
  Status status = run();
  if (status.ok()) return status;
  return fail_call(impl, impl.transport(), std::move(status), call, what);
}

bool reads_take_reduce(CommImpl& impl, std::size_t bytes) {
  return impl.size() == 2 && reads_take_allreduce(impl, bytes);
}

namespace {

/// The other rank's share of a 2-rank reduce: elements `range`, piece by piece, read from the
/// root's input at `root_input`, reduced with this rank's `own` input in rank order (the root's
/// bits), and written into the root's output at `root_output`.
Status reduce_for_root(CommImpl& impl, const RootReduceOptions& o, const std::byte* own,
                       std::uint64_t root_input, std::uint64_t root_output, patterns::Range range) {
  SharedSlots& slots = *impl.slots();
  const std::size_t es = dtype_size(o.dtype);
  const std::size_t piece = std::max<std::size_t>(1, kReadPieceBytes / es);
  std::byte* theirs = impl.scratch().get(0, 2 * piece * es);
  std::byte* result = theirs + piece * es;
  const bool first = impl.rank() == 0;
  for (std::size_t done = 0; done < range.length; done += piece) {
    const std::size_t lo = range.offset + done;
    const std::size_t count = std::min(piece, range.length - done);
    HOOP_RETURN_IF_ERROR(slots.read_peer(
        o.root, reinterpret_cast<const void*>(root_input + lo * es), theirs, count * es));
    const std::byte* mine = own + lo * es;
    HOOP_RETURN_IF_ERROR(
        reduce(result, first ? mine : theirs, first ? theirs : mine, count, o.dtype, o.op));
    if (o.op == ReduceOp::kAvg) HOOP_RETURN_IF_ERROR(divide(result, count, o.dtype, 2));
    HOOP_RETURN_IF_ERROR(slots.write_peer(
        o.root, result, reinterpret_cast<void*>(root_output + lo * es), count * es));
  }
  return Status::success();
}

}  // namespace

Status reduce_by_reading(CommImpl& impl, const RootReduceOptions& o,
                         const std::function<std::string()>& what) {
  const CallFingerprint fp{
      .kind = Collective::kReduce, .dtype = o.dtype, .op = o.op, .root = o.root, .count = o.count};
  const auto* input = static_cast<const std::byte*>(o.input != nullptr ? o.input : o.output);
  const bool root = impl.rank() == o.root;
  // Each rank publishes its input and, the root, its output: at[2r] and at[2r + 1].
  return move_by_reading(
      impl, fp, {input, root ? o.output : nullptr}, what,
      [&](SharedSlots&, std::span<const std::uint64_t> at) -> Status {
        const auto r0 = static_cast<std::size_t>(o.root);
        const std::size_t split = o.count / kRootShareDiv * kRootShareMul;
        if (!root)
          return reduce_for_root(impl, o, input, at[2 * r0], at[2 * r0 + 1],
                                 patterns::Range{split, o.count - split});
        std::vector<Layout> layouts;
        for (std::size_t r = 0; r < 2; ++r)
          layouts.emplace_back(std::vector<AllreduceBuffer>{
              {reinterpret_cast<const void*>(at[2 * r]), r == r0 ? o.output : nullptr, o.count}});
        return reduce_by_reading_range(impl, layouts, patterns::Range{0, split}, o.dtype, o.op);
      });
}

bool reads_take_moves(CommImpl& impl, std::size_t block, bool root_reads_all) {
  SharedSlots* s = impl.slots();
  return s != nullptr && s->can_read_peers() && block >= kReadMoveMin &&
         (!root_reads_all || block < kRootReadsMax) &&
         s->slot_bytes() >= kSlotOverhead + sizeof(std::uint64_t);
}

bool slots_before_reads(const CommImpl& impl, std::size_t root_bytes) {
  // The root's one copy of every block beats a slow cross-memory read per rank where the ranks
  // wait for cores anyway (4 and 8 ranks on 2 cores, 128 KiB-1 MiB in all: 0.48-0.82x the
  // time by reading; past 2 MiB 0.93-1.71x).
  return root_bytes <= kCrowdedRootSlotsMax && impl.slots_over_reads();
}

bool reads_take_copies(CommImpl& impl, std::size_t bytes, bool read_all) {
  // With more than two ranks the slots stay ahead where they fit: one copy in and every
  // reader's copy out beat a cross-memory read per reader (a broadcast on 4 ranks on 2 cores,
  // 32-256 KiB: 6.7-29 us through the slots, 9-72 us by reading).
  return bytes < kRootReadsMax && reads_take_moves(impl, bytes, false) &&
         (impl.size() == 2 || slots_for(impl, bytes, read_all) == nullptr);
}

Status move_by_reading(
    CommImpl& impl, const CallFingerprint& fp, std::initializer_list<const void*> mine,
    const std::function<std::string()>& what,
    const std::function<Status(SharedSlots&, std::span<const std::uint64_t>)>& body) {
  impl.async().drain();
  const std::uint64_t call = impl.next_call();
  const Deadline deadline = coarse_now() + impl.timeout();
  auto run = [&]() -> Status {
    const std::size_t k = mine.size();
    if (k == 0 || k > kMaxPublished)
      return internal_error(fmt::format("move_by_reading: {} addresses to publish", k));
    std::uint64_t addresses[kMaxPublished];
    std::size_t i = 0;
    for (const void* p : mine)
      addresses[i++] = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
    HOOP_RETURN_IF_ERROR(meet_in_slots(impl, fp, addresses, k * sizeof(std::uint64_t), deadline));
    // The slots are rewritten by the next meet: keep the addresses.
    std::vector<std::uint64_t> at(static_cast<std::size_t>(impl.size()) * k);
    for (std::size_t r = 0; r < at.size() / k; ++r)
      std::memcpy(&at[r * k], impl.slot_payloads()[r], k * sizeof(std::uint64_t));
    HOOP_RETURN_IF_ERROR(body(*impl.slots(), at));
    // No rank returns (and lets its caller change its buffer) while another still reads it.
    return meet_in_slots(impl, fp, nullptr, 0, deadline);
  };
  Status status = run();
  if (status.ok()) return status;
  return fail_call(impl, impl.transport(), std::move(status), call, what);
}

}  // namespace hoop::collectives
