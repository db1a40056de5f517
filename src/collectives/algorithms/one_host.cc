#include "collectives/algorithms/one_host.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/algorithms/dispatch.h"
#include "core/reduce.h"
#include "core/stream_copy.h"

namespace hoop::collectives {
namespace {

// From this size a payload that only other ranks read (SlotNeed::kNone) is written past this
// rank's caches where its readers run on other cores: they then take it from memory instead of
// snooping modified lines out of the writer's cache (docs/BENCHMARKS.md, "Slot payloads that
// only other ranks read"). A rank that reads its own slot keeps the cached copy (allgather,
// reduce_scatter: up to 1.8x slower streamed).
constexpr std::size_t kStreamSlotBytes = std::size_t{16} << 10;

/// Whether this rank writes its payload of `bytes` past its caches (see kStreamSlotBytes): a
/// rooted call's root that every other rank reads (broadcast, scatter), or, where every rank
/// has a core of its own, a giving rank that the root reads (reduce, gather). Where ranks share
/// cores, the root may run next on the giver's core and find the payload in its cache (a 4-rank
/// reduce at 16-128 KiB took 1.1-1.45x the time streamed).
bool streams(const CommImpl& impl, const SlotRole& role, std::size_t bytes) {
  return role.need == SlotNeed::kNone && bytes >= kStreamSlotBytes &&
         (impl.rank() == role.root || !impl.cost().crowded);
}

}  // namespace

CommImpl* in_slots(Communicator& comm, std::size_t bytes, bool read_all,
                   std::initializer_list<NamedBuffer> buffers, Algorithm requested) {
  auto* impl = impl_of(comm);
  if (impl == nullptr || requested != Algorithm::kAuto ||
      impl->forced_algorithm() != Algorithm::kAuto || slots_for(*impl, bytes, read_all) == nullptr)
    return nullptr;
  Result<int> device = buffers_device(buffers);
  return device.ok() && *device == kCpuDevice ? impl : nullptr;
}

namespace {

/// Where a slot's fingerprint lies: at its end, and the slot is a small one where the low bit
/// of its hash (its first word) is set. A rank that took the other kind of slot for a call has
/// another hash, so the fingerprints are compared, each read where its own slot keeps it.
std::size_t trailer_of(const CommImpl::SlotSizes& sizes, const std::byte* slot) {
  std::uint64_t hash;
  std::memcpy(&hash, slot, sizeof hash);
  return ((hash & 1) != 0 ? sizes.small_slot_bytes : sizes.slot_bytes) - kFingerprintBytes;
}

/// Compares this rank's slot `own` with rank r's, `theirs`: the hashes of the fingerprints, and
/// the fingerprints themselves where those differ.
Status check_slot(const CommImpl::SlotSizes& sizes, const std::byte* own, const std::byte* theirs,
                  int me, int r) {
  if (std::memcmp(theirs, own, sizeof(std::uint64_t)) == 0) return Status::success();
  return compare_fingerprints(own + trailer_of(sizes, own), theirs + trailer_of(sizes, theirs), me,
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
      HOOP_RETURN_IF_ERROR(
          check_slot(impl.slot_sizes(), own, at[static_cast<std::size_t>(r)], me, r));
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
  const CommImpl::SlotSizes& sizes = impl.slot_sizes();
  const bool small = role.small && sizes.small_slots >= 2;
  // The calls this rank left early, as far as this slot's rewrite needs them (SlotNeed): a
  // small call runs up to half the small slots ahead, a large one none. Where a small call must
  // confirm, it confirms a quarter of that more at once: each confirm reads a line of every
  // other rank (4 ranks on 2 cores, 8 B-4 KiB: a confirm every call took 1.3-2x the time).
  const std::uint64_t ahead = small ? sizes.small_slots / 2 : 1;
  std::uint64_t upto = seq > ahead ? seq - ahead : 0;
  if (small && upto > ledger.confirmed) upto = std::min(seq - 1, upto + (ahead - 1) / 4);
  upto = std::max(upto, ledger.large);
  HOOP_RETURN_IF_ERROR(confirm_through(impl, upto, deadline));
  const std::size_t trailer =
      (small ? sizes.small_slot_bytes : sizes.slot_bytes) - kFingerprintBytes;
  std::byte* own = slots.own_slot(seq, small);
  encode_fingerprint(fp, seq, own + trailer);
  const std::uint64_t hash =
      (fingerprint_hash(own + trailer) & ~std::uint64_t{1}) | static_cast<std::uint64_t>(small);
  ledger.digest = (ledger.digest ^ hash) * 0x9e3779b97f4a7c15ULL;
  ledger.digest ^= ledger.digest >> 29;
  std::memcpy(own, &hash, sizeof hash);
  std::memcpy(own + sizeof hash, &ledger.digest, sizeof ledger.digest);
  if (streams(impl, role, bytes)) {
    copy_streaming(own + kSlotHeaderBytes, payload, bytes);
  } else if (bytes > 0) {
    std::memcpy(own + kSlotHeaderBytes, payload, bytes);
  }
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
    HOOP_RETURN_IF_ERROR(check_slot(sizes, own, theirs, me, role.root));
    at[static_cast<std::size_t>(role.root)] = theirs + kSlotHeaderBytes;
  }
  return Status::success();
}

Status run_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* payload,
                    std::size_t bytes, FunctionRef<std::string()> what,
                    FunctionRef<Status(std::span<const std::byte* const>)> body, SlotRole role) {
  // A blocking call comes after the non-blocking ones started before it (communicator.h).
  impl.async().drain();
  const std::uint64_t call = impl.next_call();
  Status status = meet_in_slots(impl, fp, payload, role.keep_own ? 0 : bytes,
                                coarse_now() + impl.timeout(), role);
  if (status.ok() && (role.keep_own || role.own_from_source))
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

/// A rooted call's part for this rank: the rank that reads every slot (`root_reads`: reduce and
/// gather) or only the root's (broadcast and scatter), the others giving only, and returning
/// without waiting for the ranks that read them; through the small slots where the call's
/// largest payload on any rank, `call_bytes`, fits one.
SlotRole rooted_role(const CommImpl& impl, int root, bool root_reads, bool keep_own,
                     std::size_t call_bytes) {
  const bool is_root = impl.rank() == root;
  const std::size_t fits = impl.cost().crowded ? impl.slot_sizes().small_slot_bytes - kSlotOverhead
                                               : kSmallUncrowdedBytes;
  const bool small = impl.slot_sizes().small_slots > 0 && call_bytes <= fits;
  if (root_reads)
    return is_root ? SlotRole{SlotNeed::kAll, root, keep_own, small}
                   : SlotRole{SlotNeed::kNone, root, false, small};
  return SlotRole{is_root ? SlotNeed::kNone : SlotNeed::kRoot, root, false, small};
}

}  // namespace

Status allreduce_in_slots(CommImpl& impl, const AllreduceOptions& o, std::size_t bytes,
                          FunctionRef<std::string()> what) {
  const CallFingerprint fp = allreduce_fingerprint(o.count, o.dtype, o.op);
  const void* input = o.input != nullptr ? o.input : o.output;
  return run_in_slots(impl, fp, input, bytes, what, [&](std::span<const std::byte* const> in) {
    if (bytes == 0) return Status::success();
    return reduce_in_rank_order(o.output, in, o.count, o.dtype, o.op);
  });
}

Status reduce_in_slots(CommImpl& impl, const RootReduceOptions& o, std::size_t bytes,
                       FunctionRef<std::string()> what) {
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
        return reduce_in_rank_order(o.output, in, o.count, o.dtype, o.op);
      },
      rooted_role(impl, o.root, true, keep_own, bytes));
}

Status blocks_in_slots(CommImpl& impl, const CallFingerprint& fp, bool gather, std::byte* blocks,
                       std::byte* mine, std::span<const std::size_t> offsets,
                       std::span<const std::size_t> lengths, int root, std::size_t call_bytes,
                       FunctionRef<std::string()> what) {
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
        // The root's own block comes from its input, not from its slot, which it never reads
        // (SlotNeed::kNone: the slot may bypass its caches).
        const std::byte* from =
            is_root ? blocks + offsets[m] : in[static_cast<std::size_t>(root)] + offsets[m];
        if (lengths[m] > 0 && from != mine) std::memmove(mine, from, lengths[m]);
        return Status::success();
      },
      rooted_role(impl, root, gather, keep_own, call_bytes));
}

Status broadcast_in_slots(CommImpl& impl, const BroadcastOptions& o, std::size_t bytes,
                          FunctionRef<std::string()> what) {
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
                          FunctionRef<std::string()> what) {
  const CallFingerprint fp{.kind = Collective::kAllgather, .dtype = o.dtype, .count = o.count};
  auto* out = static_cast<std::byte*>(o.output);
  // In place, this rank's block is in the output already.
  const void* mine = o.input != nullptr ? o.input : out + block * impl.rank();
  // Its own block comes from where it lies, not from its slot (2 ranks, 2-32 KiB blocks:
  // 0.66-0.91x the time).
  SlotRole role;
  role.own_from_source = true;
  return run_in_slots(
      impl, fp, mine, block, what,
      [&](std::span<const std::byte* const> in) {
        if (block == 0) return Status::success();
        for (std::size_t r = 0; r < in.size(); ++r)
          if (in[r] != out + block * r) std::memmove(out + block * r, in[r], block);
        return Status::success();
      },
      role);
}

Status barrier_in_slots(CommImpl& impl) {
  return run_in_slots(
      impl, CallFingerprint{.kind = Collective::kBarrier}, nullptr, 0,
      [] { return std::string("barrier"); },
      [](std::span<const std::byte* const>) { return Status::success(); });
}

Status reduce_scatter_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* input,
                               std::size_t bytes, void* output, std::size_t offset,
                               std::size_t count, FunctionRef<std::string()> what) {
  return run_in_slots(impl, fp, input, bytes, what, [&](std::span<const std::byte* const> in) {
    if (count == 0) return Status::success();
    return reduce_in_rank_order(output, in, count, *fp.dtype, *fp.op, offset);
  });
}

Status alltoall_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* input,
                         std::size_t block, void* output, FunctionRef<std::string()> what) {
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

}  // namespace hoop::collectives
