#include "collectives/algorithms/one_host.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/algorithms/dispatch.h"
#include "collectives/patterns/partition.h"
#include "core/reduce.h"

namespace hoop::collectives {
namespace {

// A slot read by every other rank costs each rank (size - 1) times the payload in reads from
// other cores' caches, where the rings and the single-copy allreduce move about twice the
// payload whatever the size: past this many bytes read per rank they win (measured on 2, 4 and 8
// ranks: docs/BENCHMARKS.md, "Shared slots and single-copy reads").
constexpr std::size_t kReadAllBudget = std::size_t{512} << 10;

// From this size reading the peers' memory beats the rings at every size measured, to 64 MiB
// (bench: docs/BENCHMARKS.md, "Shared slots"); below it the slots are quicker than three meets
// and a system call per peer.
constexpr std::size_t kReadMin = std::size_t{64} << 10;
// From this many bytes per block the collectives that only move blocks (gather, scatter,
// alltoall) read them where they lie rather than through the slots, which copy each block
// twice (in, out): at 32 KiB the slots took 1.3-1.5x Open MPI's vader, which copies once
// (docs/BENCHMARKS.md, "Rooted collectives and the exchanges in the shared slots").
constexpr std::size_t kReadMoveMin = std::size_t{32} << 10;
// Where the root alone reads every block (gather), up to this size per block: past it the
// messages, whose sender copies into the ring while the root copies out, use both cores and
// won (gather of 2 MiB blocks: 0.82x vader's time by messages, 1.07x by reading; of 1 MiB
// blocks at 4 ranks, 1.02x against 0.95x).
constexpr std::size_t kRootReadsMax = std::size_t{2} << 20;
// Elements reduced per pass: the running sum and one peer's piece stay in the L2 cache. 256 KiB
// pieces took 0.82-0.95x the time of 64 KiB ones in 2-rank reads from 512 KiB to 8 MiB (fewer
// cross-memory calls); 512 KiB ones were as fast from 1 MiB and 1.46x slower at 512 KiB.
constexpr std::size_t kReadPieceBytes = std::size_t{256} << 10;

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
    (void)parts(lo, hi, [&](const AllreduceBuffer& b, std::size_t first, std::size_t count,
                            std::size_t) {
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
    return Layout({{reinterpret_cast<const void*>(p.input), reinterpret_cast<void*>(p.output),
                    count}});
  std::vector<AllreduceBuffer> list(p.buffers);
  HOOP_RETURN_IF_ERROR(slots.read_peer(peer, reinterpret_cast<const void*>(p.list), list.data(),
                                       list.size() * sizeof(AllreduceBuffer)));
  return Layout(std::move(list));
}

/// Both one-host allreduces are auto's choice: a rank that named an algorithm took the messages.
CallFingerprint allreduce_fingerprint(std::size_t count, DataType dtype, ReduceOp op) {
  return CallFingerprint{.kind = Collective::kAllreduce,
                         .dtype = dtype,
                         .op = op,
                         .algorithm = Algorithm::kAuto,
                         .count = count};
}

}  // namespace

CommImpl* in_slots(Communicator& comm, std::size_t bytes, bool read_all,
                   std::initializer_list<NamedBuffer> buffers, Algorithm requested) {
  auto* impl = dynamic_cast<CommImpl*>(&comm);
  if (impl == nullptr || requested != Algorithm::kAuto ||
      impl->forced_algorithm() != Algorithm::kAuto || slots_for(*impl, bytes, read_all) == nullptr)
    return nullptr;
  Result<int> device = buffers_device(buffers);
  return device.ok() && *device == kCpuDevice ? impl : nullptr;
}

SharedSlots* slots_for(CommImpl& impl, std::size_t bytes, bool read_all) {
  SharedSlots* s = impl.slots();
  if (s == nullptr || bytes > s->slot_bytes() - kSlotOverhead) return nullptr;
  if (read_all && bytes * static_cast<std::size_t>(impl.size() - 1) > kReadAllBudget)
    return nullptr;
  return s;
}

namespace {

/// Where a slot's fingerprint lies: at its end, and the slot is a small one where the low bit
/// of its hash (its first word) is set. A rank that took the other kind of slot for a call has
/// another hash, so the fingerprints are compared, each read where its own slot keeps it.
std::size_t trailer_of(const SharedSlots& slots, const std::byte* slot) {
  std::uint64_t hash;
  std::memcpy(&hash, slot, sizeof hash);
  return ((hash & 1) != 0 ? slots.small_slot_bytes() : slots.slot_bytes()) - kFingerprintBytes;
}

/// Compares this rank's slot `own` with rank r's, `theirs`: the hashes of the fingerprints, and
/// the fingerprints themselves where those differ.
Status check_slot(const SharedSlots& slots, const std::byte* own, const std::byte* theirs, int me,
                  int r) {
  if (std::memcmp(theirs, own, sizeof(std::uint64_t)) == 0) return Status::success();
  return compare_fingerprints(own + trailer_of(slots, own), theirs + trailer_of(slots, theirs), me,
                              r);
}

/// Waits for every rank's slot of call `seq` (into `at`, at the slots' starts) and compares
/// each with this rank's own.
Status gather_checked(CommImpl& impl, std::uint64_t seq, std::vector<const std::byte*>& at,
                      Deadline deadline) {
  SharedSlots& slots = *impl.slots();
  at.resize(static_cast<std::size_t>(impl.size()));
  HOOP_RETURN_IF_ERROR(slots.gather(seq, at, deadline));
  const int me = impl.rank();
  const std::byte* own = at[static_cast<std::size_t>(me)];
  for (int r = 0; r < impl.size(); ++r)
    if (r != me)
      HOOP_RETURN_IF_ERROR(check_slot(slots, own, at[static_cast<std::size_t>(r)], me, r));
  return Status::success();
}

/// Whether every rank's slot in `at` (one call's, at the slots' starts) carries this rank's
/// digest: then every slot call up to that one had the same fingerprint on every rank.
bool digests_agree(const CommImpl& impl, std::span<const std::byte*> at) {
  const std::byte* own = at[static_cast<std::size_t>(impl.rank())] + sizeof(std::uint64_t);
  return std::all_of(at.begin(), at.end(), [&](const std::byte* slot) {
    return std::memcmp(slot + sizeof(std::uint64_t), own, sizeof(std::uint64_t)) == 0;
  });
}

/// Names the first slot call from `first` to `last`, all published by every rank, whose
/// fingerprints differ between ranks (their digests did).
Status name_mismatch(CommImpl& impl, std::uint64_t first, std::uint64_t last, Deadline deadline) {
  for (std::uint64_t c = first; c <= last; ++c)
    HOOP_RETURN_IF_ERROR(gather_checked(impl, c, impl.slot_ledger().found, deadline));
  return internal_error(fmt::format(
      "shared slots: the ranks' digests of calls {} to {} differ, their fingerprints do not", first,
      last));
}

/// Confirms every slot call up to `upto` that this rank left without seeing every rank's slot
/// (SlotNeed): waits until every rank has published `upto` and compares the digests there.
Status confirm_through(CommImpl& impl, std::uint64_t upto, Deadline deadline) {
  CommImpl::SlotLedger& ledger = impl.slot_ledger();
  if (ledger.confirmed < upto) {
    ledger.found.resize(static_cast<std::size_t>(impl.size()));
    HOOP_RETURN_IF_ERROR(impl.slots()->gather(upto, ledger.found, deadline));
    if (!digests_agree(impl, ledger.found))
      return name_mismatch(impl, ledger.confirmed + 1, upto, deadline);
    ledger.confirmed = upto;
  }
  if (ledger.large <= ledger.confirmed) ledger.large = 0;
  return Status::success();
}

}  // namespace

Status meet_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* payload,
                     std::size_t bytes, Deadline deadline, const SlotRole& role) {
  SharedSlots& slots = *impl.slots();
  const std::uint64_t seq = impl.next_slot_call();
  CommImpl::SlotLedger& ledger = impl.slot_ledger();
  const bool small = role.small && slots.small_slots() >= 2;
  // The calls this rank left early, as far as this slot's rewrite needs them (SlotNeed): a
  // small call runs up to half the small slots ahead, a large one none. Where a small call must
  // confirm, it confirms a quarter of that more at once: each confirm reads a line of every
  // other rank (4 ranks on 2 cores, 8 B-4 KiB: a confirm every call took 1.3-2x the time).
  const std::uint64_t ahead = small ? slots.small_slots() / 2 : 1;
  std::uint64_t upto = seq > ahead ? seq - ahead : 0;
  if (small && upto > ledger.confirmed) upto = std::min(seq - 1, upto + (ahead - 1) / 4);
  upto = std::max(upto, ledger.large);
  HOOP_RETURN_IF_ERROR(confirm_through(impl, upto, deadline));
  const std::size_t trailer =
      (small ? slots.small_slot_bytes() : slots.slot_bytes()) - kFingerprintBytes;
  std::byte* own = slots.own_slot(seq, small);
  encode_fingerprint(fp, seq, own + trailer);
  const std::uint64_t hash =
      (fingerprint_hash(own + trailer) & ~std::uint64_t{1}) | static_cast<std::uint64_t>(small);
  ledger.digest = (ledger.digest ^ hash) * 0x9e3779b97f4a7c15ULL;
  ledger.digest ^= ledger.digest >> 29;
  std::memcpy(own, &hash, sizeof hash);
  std::memcpy(own + sizeof hash, &ledger.digest, sizeof ledger.digest);
  if (bytes > 0) std::memcpy(own + kSlotHeaderBytes, payload, bytes);
  slots.publish(seq, small);
  std::vector<const std::byte*>& at = impl.slot_payloads();
  at.resize(static_cast<std::size_t>(impl.size()));
  SlotNeed need = role.need;
  // With two ranks the root is every other rank.
  if (need == SlotNeed::kRoot && impl.size() == 2) need = SlotNeed::kAll;
  if (need == SlotNeed::kAll) {
    // The digests confirm this call and every one before it; where they differ, the first call
    // that differs is named.
    HOOP_RETURN_IF_ERROR(slots.gather(seq, at, deadline));
    if (!digests_agree(impl, at)) return name_mismatch(impl, ledger.confirmed + 1, seq, deadline);
    ledger.confirmed = seq;
    ledger.large = 0;
    for (const std::byte*& a : at) a += kSlotHeaderBytes;
    return Status::success();
  }
  const int me = impl.rank();
  if (!small) ledger.large = seq;
  at[static_cast<std::size_t>(me)] = own + kSlotHeaderBytes;
  if (need == SlotNeed::kRoot) {
    HOOP_ASSIGN_OR_RETURN(const std::byte* theirs, slots.gather_one(seq, role.root, deadline));
    HOOP_RETURN_IF_ERROR(check_slot(slots, own, theirs, me, role.root));
    at[static_cast<std::size_t>(role.root)] = theirs + kSlotHeaderBytes;
  }
  return Status::success();
}

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
      HOOP_RETURN_IF_ERROR(mine.parts(lo, hi, [&](const AllreduceBuffer& x, std::size_t i,
                                                   std::size_t count, std::size_t) {
        auto* out = static_cast<std::byte*>(x.output) + i * es;
        const auto* own = static_cast<const std::byte*>(x.input) + i * es;
        return me == 0 ? reduce(out, own, out, count, dtype, op)
                       : reduce(out, out, own, count, dtype, op);
      }));
    } else {
      HOOP_ASSIGN_OR_RETURN(const std::byte* a, operand(0, got[0]));
      HOOP_ASSIGN_OR_RETURN(const std::byte* b, operand(1, got[1]));
      HOOP_RETURN_IF_ERROR(mine.parts(lo, hi, [&](const AllreduceBuffer& x, std::size_t i,
                                                   std::size_t count, std::size_t off) {
        return reduce(dst(x, i, off), at_offset(a, x, i, off), at_offset(b, x, i, off), count,
                      dtype, op);
      }));
    }
    for (int r = 2; r < n; ++r) {
      HOOP_ASSIGN_OR_RETURN(const std::byte* c, operand(r, got[0]));
      HOOP_RETURN_IF_ERROR(mine.parts(lo, hi, [&](const AllreduceBuffer& x, std::size_t i,
                                                   std::size_t count, std::size_t off) {
        return reduce_into(dst(x, i, off), at_offset(c, x, i, off), count, dtype, op);
      }));
    }
    HOOP_RETURN_IF_ERROR(mine.parts(lo, hi, [&](const AllreduceBuffer& x, std::size_t i,
                                                 std::size_t count, std::size_t off) {
      Status s = op == ReduceOp::kAvg ? divide(dst(x, i, off), count, dtype, n)
                                      : Status::success();
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
  const Deadline deadline = Clock::now() + impl.timeout();
  const CallFingerprint fp = allreduce_fingerprint(count, dtype, op);
  SharedSlots& slots = *impl.slots();
  const int n = impl.size();
  const int me = impl.rank();
  const std::size_t es = dtype_size(dtype);
  const patterns::Partition part(count, n);
  auto run = [&]() -> Status {
    const AllreduceBuffer one = buffers.size() == 1 ? buffers.front() : AllreduceBuffer{};
    const Published mine{buffers.size(), reinterpret_cast<std::uintptr_t>(buffers.data()),
                         reinterpret_cast<std::uintptr_t>(one.input != nullptr ? one.input
                                                                               : one.output),
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

Status reduce_by_reading(CommImpl& impl, const RootReduceOptions& o,
                         const std::function<std::string()>& what) {
  const CallFingerprint fp{
      .kind = Collective::kReduce, .dtype = o.dtype, .op = o.op, .root = o.root, .count = o.count};
  const auto* input = static_cast<const std::byte*>(o.input != nullptr ? o.input : o.output);
  return move_by_reading(impl, fp, input, what,
                         [&](SharedSlots&, std::span<const std::uint64_t> inputs) -> Status {
                           if (impl.rank() != o.root) return Status::success();
                           std::vector<Layout> at;
                           for (std::size_t r = 0; r < inputs.size(); ++r) {
                             const bool me = static_cast<int>(r) == o.root;
                             at.emplace_back(std::vector<AllreduceBuffer>{
                                 {reinterpret_cast<const void*>(inputs[r]),
                                  me ? o.output : nullptr, o.count}});
                           }
                           return reduce_by_reading_range(impl, at, patterns::Range{0, o.count},
                                                          o.dtype, o.op);
                         });
}

Status run_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* payload,
                    std::size_t bytes, const std::function<std::string()>& what,
                    const std::function<Status(std::span<const std::byte* const>)>& body,
                    SlotRole role) {
  // A blocking call comes after the non-blocking ones started before it (communicator.h).
  impl.async().drain();
  const std::uint64_t call = impl.next_call();
  Status status = meet_in_slots(impl, fp, payload, role.keep_own ? 0 : bytes,
                                Clock::now() + impl.timeout(), role);
  if (status.ok() && role.keep_own)
    impl.slot_payloads()[static_cast<std::size_t>(impl.rank())] =
        static_cast<const std::byte*>(payload);
  if (status.ok()) status = body(impl.slot_payloads());
  if (status.ok()) return status;
  return fail_call(impl, impl.transport(), std::move(status), call, what);
}

namespace {

// From this size a rooted call's root keeps its own payload out of its slot (run_in_slots'
// keep_own); below it the copy costs nothing worth measuring.
constexpr std::size_t kKeepOwnBytes = 4096;

// Where the ranks outnumber the cores (CostParams::crowded, the same on every rank), a rooted
// call's giving ranks run ahead through the small slots up to their size, 8 KiB: a call then
// no longer costs a switch of processes (4 ranks on 2 cores, 8 B-8 KiB: 0.2-0.5x the time of
// the two large slots). Where every rank has a core, up to this size only: payloads written
// many calls ahead of their reader cost more than they save there (2 ranks on 2 cores, 8 KiB
// broadcast and scatter: 1.4-1.8x the time; 1 KiB and below: no change).
constexpr std::size_t kSmallUncrowdedBytes = 1024;

/// `out` = op over the slots `in`, from `offset` bytes into each, in rank order (every rank
/// that computes it gets the same bits).
Status reduce_slots(void* out, std::span<const std::byte* const> in, std::size_t count,
                    DataType dtype, ReduceOp op, std::size_t offset = 0) {
  HOOP_RETURN_IF_ERROR(reduce(out, in[0] + offset, in[1] + offset, count, dtype, op));
  for (std::size_t r = 2; r < in.size(); ++r)
    HOOP_RETURN_IF_ERROR(reduce_into(out, in[r] + offset, count, dtype, op));
  if (op == ReduceOp::kAvg)
    return divide(out, count, dtype, static_cast<std::int64_t>(in.size()));
  return Status::success();
}

/// A rooted call's part for this rank: the rank that reads every slot (`root_reads`: reduce and
/// gather) or only the root's (broadcast and scatter), the others giving only, and returning
/// without waiting for the ranks that read them; through the small slots where the call's
/// largest payload on any rank, `call_bytes`, fits one.
SlotRole rooted_role(const CommImpl& impl, int root, bool root_reads, bool keep_own,
                     std::size_t call_bytes) {
  const bool is_root = impl.rank() == root;
  const std::size_t fits =
      impl.cost().crowded ? impl.slots()->small_slot_bytes() - kSlotOverhead : kSmallUncrowdedBytes;
  const bool small = impl.slots()->small_slots() > 0 && call_bytes <= fits;
  if (root_reads)
    return is_root ? SlotRole{SlotNeed::kAll, root, keep_own, small}
                   : SlotRole{SlotNeed::kNone, root, false, small};
  return SlotRole{is_root ? SlotNeed::kNone : SlotNeed::kRoot, root, false, small};
}

}  // namespace

Status allreduce_in_slots(CommImpl& impl, const AllreduceOptions& o, std::size_t bytes,
                          const std::function<std::string()>& what) {
  const CallFingerprint fp = allreduce_fingerprint(o.count, o.dtype, o.op);
  const void* input = o.input != nullptr ? o.input : o.output;
  return run_in_slots(impl, fp, input, bytes, what, [&](std::span<const std::byte* const> in) {
    if (bytes == 0) return Status::success();
    return reduce_slots(o.output, in, o.count, o.dtype, o.op);
  });
}

Status reduce_in_slots(CommImpl& impl, const RootReduceOptions& o, std::size_t bytes,
                       const std::function<std::string()>& what) {
  const CallFingerprint fp{
      .kind = Collective::kReduce, .dtype = o.dtype, .op = o.op, .root = o.root, .count = o.count};
  const bool root = impl.rank() == o.root;
  // Past a few KiB the root's own input stays where it lies instead of being copied into its
  // slot: one pass less over the data. Not when it is the output and a rank after the first two
  // adds its term after the running sum has overwritten it.
  const bool keep_own = root && bytes >= kKeepOwnBytes && (o.input != o.output || o.root < 2);
  return run_in_slots(
      impl, fp, o.input, bytes, what,
      [&](std::span<const std::byte* const> in) {
        if (!root || bytes == 0) return Status::success();
        return reduce_slots(o.output, in, o.count, o.dtype, o.op);
      },
      rooted_role(impl, o.root, true, keep_own, bytes));
}

Status blocks_in_slots(CommImpl& impl, const CallFingerprint& fp, bool gather, std::byte* blocks,
                       std::byte* mine, std::span<const std::size_t> offsets,
                       std::span<const std::size_t> lengths, int root,
                       const std::function<std::string()>& what) {
  const int me = impl.rank();
  const auto m = static_cast<std::size_t>(me);
  const bool is_root = me == root;
  const void* payload = gather ? mine : blocks;
  std::size_t bytes = gather ? lengths[m] : 0;
  if (!gather && is_root) bytes = offsets.back() + lengths.back();
  // A gather's root moves its own block straight to its place (nothing at all in place).
  const bool keep_own = gather && is_root && bytes >= kKeepOwnBytes;
  return run_in_slots(
      impl, fp, payload, bytes, what,
      [&](std::span<const std::byte* const> in) {
        if (gather) {
          if (!is_root) return Status::success();
          // memmove: in place, the root's own block is its slot's source.
          for (std::size_t r = 0; r < in.size(); ++r)
            if (lengths[r] > 0 && in[r] != blocks + offsets[r])
              std::memmove(blocks + offsets[r], in[r], lengths[r]);
          return Status::success();
        }
        if (lengths[m] > 0)
          std::memmove(mine, in[static_cast<std::size_t>(root)] + offsets[m], lengths[m]);
        return Status::success();
      },
      rooted_role(impl, root, gather, keep_own,
                  gather ? *std::max_element(lengths.begin(), lengths.end())
                         : offsets.back() + lengths.back()));
}

Status broadcast_in_slots(CommImpl& impl, const BroadcastOptions& o, std::size_t bytes,
                          const std::function<std::string()>& what) {
  const CallFingerprint fp{
      .kind = Collective::kBroadcast, .dtype = o.dtype, .root = o.root, .count = o.count};
  const bool root = impl.rank() == o.root;
  return run_in_slots(
      impl, fp, o.buffer, root ? bytes : 0, what,
      [&](std::span<const std::byte* const> in) {
        if (!root && bytes > 0) std::memcpy(o.buffer, in[o.root], bytes);
        return Status::success();
      },
      rooted_role(impl, o.root, false, false, bytes));
}

Status allgather_in_slots(CommImpl& impl, const AllgatherOptions& o, std::size_t block,
                          const std::function<std::string()>& what) {
  const CallFingerprint fp{.kind = Collective::kAllgather, .dtype = o.dtype, .count = o.count};
  auto* out = static_cast<std::byte*>(o.output);
  // In place, this rank's block is in the output already.
  const void* mine = o.input != nullptr ? o.input : out + block * impl.rank();
  return run_in_slots(impl, fp, mine, block, what, [&](std::span<const std::byte* const> in) {
    if (block == 0) return Status::success();
    for (std::size_t r = 0; r < in.size(); ++r) std::memmove(out + block * r, in[r], block);
    return Status::success();
  });
}

Status barrier_in_slots(CommImpl& impl) {
  return run_in_slots(
      impl, CallFingerprint{.kind = Collective::kBarrier}, nullptr, 0,
      [] { return std::string("barrier"); },
      [](std::span<const std::byte* const>) { return Status::success(); });
}

Status reduce_scatter_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* input,
                              std::size_t bytes, void* output, std::size_t offset,
                              std::size_t count, const std::function<std::string()>& what) {
  return run_in_slots(impl, fp, input, bytes, what, [&](std::span<const std::byte* const> in) {
    if (count == 0) return Status::success();
    return reduce_slots(output, in, count, *fp.dtype, *fp.op, offset);
  });
}

Status alltoall_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* input,
                         std::size_t block, void* output,
                         const std::function<std::string()>& what) {
  const std::size_t n = static_cast<std::size_t>(impl.size());
  const std::size_t me = static_cast<std::size_t>(impl.rank());
  auto* out = static_cast<std::byte*>(output);
  return run_in_slots(impl, fp, input, block * n, what, [&](std::span<const std::byte* const> in) {
    if (block == 0) return Status::success();
    // In place, every block comes from a slot, this rank's own too: none is overwritten first.
    for (std::size_t r = 0; r < n; ++r) std::memcpy(out + block * r, in[r] + block * me, block);
    return Status::success();
  });
}

bool reads_take_moves(CommImpl& impl, std::size_t block, bool root_reads_all) {
  SharedSlots* s = impl.slots();
  return s != nullptr && s->can_read_peers() && block >= kReadMoveMin &&
         (!root_reads_all || block < kRootReadsMax) &&
         s->slot_bytes() >= kSlotOverhead + sizeof(std::uint64_t);
}

bool reads_take_copies(CommImpl& impl, std::size_t bytes, bool read_all) {
  // With more than two ranks the slots stay ahead where they fit: one copy in and every
  // reader's copy out beat a cross-memory read per reader (a broadcast on 4 ranks on 2 cores,
  // 32-256 KiB: 6.7-29 us through the slots, 9-72 us by reading).
  return bytes < kRootReadsMax && reads_take_moves(impl, bytes, false) &&
         (impl.size() == 2 || slots_for(impl, bytes, read_all) == nullptr);
}

Status move_by_reading(CommImpl& impl, const CallFingerprint& fp, const void* mine,
                       const std::function<std::string()>& what,
                       const std::function<Status(SharedSlots&, std::span<const std::uint64_t>)>&
                           body) {
  impl.async().drain();
  const std::uint64_t call = impl.next_call();
  const Deadline deadline = Clock::now() + impl.timeout();
  auto run = [&]() -> Status {
    const auto address = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(mine));
    HOOP_RETURN_IF_ERROR(meet_in_slots(impl, fp, &address, sizeof address, deadline));
    // The slots are rewritten by the next meet: keep the addresses.
    std::vector<std::uint64_t> at(static_cast<std::size_t>(impl.size()));
    for (std::size_t r = 0; r < at.size(); ++r)
      std::memcpy(&at[r], impl.slot_payloads()[r], sizeof(std::uint64_t));
    HOOP_RETURN_IF_ERROR(body(*impl.slots(), at));
    // No rank returns (and lets its caller change its buffer) while another still reads it.
    return meet_in_slots(impl, fp, nullptr, 0, deadline);
  };
  Status status = run();
  if (status.ok()) return status;
  return fail_call(impl, impl.transport(), std::move(status), call, what);
}

}  // namespace hoop::collectives
