// Collectives through shared slots (hoop::SharedSlots in hoop/transport.h), for communicators
// whose ranks all share memory: a small collective is one step. Every rank writes its call's
// fingerprint and its input into its own slot, publishes it, waits until every rank has, checks
// the fingerprints and reads what it needs from the other ranks' slots where they are: no
// message, no request, no algorithm. Every rank reduces the slots in rank order, so every rank
// ends with bitwise the same result.
//
// Larger calls go through messages as before, but their fingerprints meet in the slots too
// (fingerprint only): the ranks of one call then agree on their path through the slots, and a
// rank that takes the slots while another takes messages is a mismatch both ranks name, not a
// hang. The slots compare fingerprints even with HOOP_CALL_CHECK=0, since it costs nothing
// there.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>

#include "collectives/algorithms/call_check.h"
#include "collectives/algorithms/comm_impl.h"
#include "collectives/algorithms/device_path.h"
#include "core/function_ref.h"
#include "hoop/communicator.h"

namespace hoop::collectives {

/// A slot: a hash of the call's fingerprint (8 bytes), a digest of the hashes of every slot
/// call of its rank up to this one (8 bytes), the payload, and at the slot's end the
/// fingerprint itself, read only when the hashes differ. A payload of up to 40 bytes then
/// shares one cache line with the hash and the call number: one line to move per peer.
inline constexpr std::size_t kSlotHeaderBytes = 16;
inline constexpr std::size_t kSlotOverhead = kSlotHeaderBytes + kFingerprintBytes;

/// The fingerprint of an allreduce through the slots or by reading: both are auto's choice, so
/// a rank that named an algorithm took the messages and is a mismatch.
inline CallFingerprint allreduce_fingerprint(std::size_t count, DataType dtype, ReduceOp op) {
  return CallFingerprint{.kind = Collective::kAllreduce,
                         .dtype = dtype,
                         .op = op,
                         .algorithm = Algorithm::kAuto,
                         .count = count};
}

/// A slot read by every other rank costs each rank (size - 1) times the payload in reads from
/// other cores' caches, where the rings and the single-copy allreduce move about twice the
/// payload whatever the size: past this many bytes read per rank they win (measured on 2, 4 and 8
/// ranks: docs/BENCHMARKS.md, "Shared slots and single-copy reads").
inline constexpr std::size_t kReadAllBudget = std::size_t{512} << 10;
/// kReadAllBudget where the peers' memory reads slowly (SharedSlots::reads_slowly: a read at
/// under half memcpy's speed, a quarter on the AMD guest of 2026-12-07). The single-copy paths
/// then pay 2x their reads' ratio in copies, the slots still n - 1: at 4 ranks on 2 cores a
/// 256 KiB allreduce took 204 us through the slots against 440 us by reading. Where the job is
/// crowded too, the slots take whatever fits them (SharedSlots::slot_bytes, which the shm
/// transport widens for such jobs): the reading paths' steps wait for ranks that have no core,
/// and 4 and 8 ranks on 2 cores took 0.3-0.8x their time through the slots up to 4 MiB (28 MiB
/// read per rank at 8 ranks).
inline constexpr std::size_t kReadAllBudgetSlowReads = std::size_t{2} << 20;

/// `impl`'s slots when a collective whose largest payload on any rank is `bytes` (and, where
/// every rank reads every other's, `read_all`) goes through them; null otherwise. Inline: every
/// small call asks once or twice.
inline SharedSlots* slots_for(CommImpl& impl, std::size_t bytes, bool read_all) {
  SharedSlots* s = impl.slots();
  if (s == nullptr || bytes > impl.slot_sizes().slot_bytes - kSlotOverhead) return nullptr;
  if (read_all) {
    const std::size_t read = bytes * static_cast<std::size_t>(impl.size() - 1);
    if (read > kReadAllBudget && !impl.slots_over_reads() &&
        (!s->reads_slowly() || read > kReadAllBudgetSlowReads))
      return nullptr;
  }
  return s;
}

/// hoop's own communicator when a call whose largest slot payload on any rank is `bytes` (see
/// slots_for) on `buffers` goes through its shared slots: host buffers, and no algorithm asked
/// for by name. Every rank of a call decides alike from what they share.
CommImpl* in_slots(Communicator& comm, std::size_t bytes, bool read_all,
                   std::initializer_list<NamedBuffer> buffers,
                   Algorithm requested = Algorithm::kAuto);

/// What a rank needs of a slot call: every rank's slot (a meet: no rank leaves before all have
/// come), the root's alone (a broadcast's or scatter's receiver), or none (a rank that only
/// gives: a broadcast's or scatter's root, a reduce's or gather's other ranks). A rank that
/// needs less than every slot leaves as soon as it has what it needs, as an eager message's
/// sender does. Such a call is confirmed later: before a rank rewrites a slot that a rank might
/// still be reading, it waits until every rank has published a later call and compares the
/// digests in their slots, which fold in the fingerprint of every call up to it; where they
/// differ it compares the calls one by one and names the first that differs.
///
/// How far a rank may run ahead: a call in the two large slots is confirmed before the next
/// call is published (one call ahead). A rooted call whose payloads fit the small slots
/// (SharedSlots::small_slots(), k of them) is confirmed up to k/2 calls later: before a rank
/// publishes small call s it has confirmed every call up to s - k/2 (a quarter of k/2 more at
/// once when it must confirm, so that it reads the others' slots once per several calls), so a
/// rank that has published s has confirmed s - k/2, and slot s - k, which s rewrites, has been
/// read and confirmed by every rank. A meet confirms every call before it too (all are
/// published by then). A mismatch is named k/2 calls late at most, or at the next meet.
enum class SlotNeed { kAll, kRoot, kNone };

/// How a rank takes part in a slot call (run_in_slots).
struct SlotRole {
  SlotNeed need = SlotNeed::kAll;
  int root = -1;  ///< whose slot SlotNeed::kRoot reads
  /// This rank's payload is for itself alone (a rooted call's root that reads every slot): it
  /// publishes none, and body's entry for this rank is the payload where it lies, a copy saved.
  bool keep_own = false;
  /// The call goes through the small slots: the largest payload on any rank fits one (decided
  /// alike on every rank, see SlotNeed).
  bool small = false;
  /// This rank publishes its payload for the others but takes its own from where it lies
  /// (body's entry for this rank is the payload itself): its slot is then only read by others.
  bool own_from_source = false;
};

/// Publishes `fp` and `bytes` bytes at `payload` in the next slot call of `impl`, waits by
/// `deadline` for the slots this rank needs (role.need; role.root's for SlotNeed::kRoot) and
/// compares their fingerprints with its own. impl.slot_payloads()[r] then points at rank r's
/// payload, for this rank and the ranks whose slot it needed.
Status meet_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* payload,
                     std::size_t bytes, Deadline deadline, const SlotRole& role = {});

/// One collective through the slots: meet_in_slots() as `role` says, then `body` on the
/// payloads; on failure the transport is aborted (every peer fails with the cause) and `what`
/// named.
Status run_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* payload,
                    std::size_t bytes, FunctionRef<std::string()> what,
                    FunctionRef<Status(std::span<const std::byte* const>)> body,
                    SlotRole role = {});

/// Whether an allreduce of `bytes` goes through reading the other ranks' memory directly
/// (allreduce_by_reading): a host whose ranks all can, at sizes where that beats the rings.
bool reads_take_allreduce(CommImpl& impl, std::size_t bytes);

/// The single-copy allreduce of `count` elements in `buffers` (one for allreduce, a list for
/// allreduce_list): the ranks publish where their buffers are in the slots; each rank reduces
/// its chunk reading every rank's input where it lies (rank order), and after a meet reads
/// every other rank's finished chunk into its outputs; a last meet keeps the buffers unchanged
/// until every rank has read them. Each byte crosses between processes once per phase, where
/// the rings copy it in and out. Ranks may split their buffers differently.
Status allreduce_by_reading(CommImpl& impl, std::span<const AllreduceBuffer> buffers,
                            std::size_t count, DataType dtype, ReduceOp op,
                            const std::function<std::string()>& what);

/// Whether a reduce of `bytes` goes through the root reading the other rank's input where it
/// lies (reduce_by_reading): two ranks on a host whose ranks can read each other's memory, at
/// the sizes where allreduce reads too. With more ranks the root alone would read every input.
bool reads_take_reduce(CommImpl& impl, std::size_t bytes);

/// The single-copy reduce of two ranks: they publish their inputs' addresses in the slots (the
/// root its output's too); the root reduces the first part of the elements into its output,
/// reading the other's input where it lies, and the other rank the rest, reading the root's
/// input and writing the result into the root's output (SharedSlots::write_peer), both in rank
/// order and piece by piece; a last meet keeps the buffers unchanged until both are done.
Status reduce_by_reading(CommImpl& impl, const RootReduceOptions& o,
                         const std::function<std::string()>& what);

/// The one-step forms of the collectives (`bytes`: the payload of this rank's slot).
Status allreduce_in_slots(CommImpl& impl, const AllreduceOptions& o, std::size_t bytes,
                          FunctionRef<std::string()> what);
Status broadcast_in_slots(CommImpl& impl, const BroadcastOptions& o, std::size_t bytes,
                          FunctionRef<std::string()> what);
Status allgather_in_slots(CommImpl& impl, const AllgatherOptions& o, std::size_t block,
                          FunctionRef<std::string()> what);
Status barrier_in_slots(CommImpl& impl);

/// The rooted collectives in one step: every rank publishes its input and the root reduces the
/// slots in rank order (the bits of allreduce_in_slots); gather: every rank publishes its block
/// (`lengths[rank]` bytes) and the root copies each to `offsets[r]` of `blocks`; scatter: the
/// root publishes every block (`blocks`) and each rank copies its own to `mine`. In place on
/// the root, its own block may already be where it belongs. `call_bytes`: the largest slot
/// payload on any rank (the largest block, or the scatter root's every block).
Status reduce_in_slots(CommImpl& impl, const RootReduceOptions& o, std::size_t bytes,
                       FunctionRef<std::string()> what);
Status blocks_in_slots(CommImpl& impl, const CallFingerprint& fp, bool gather, std::byte* blocks,
                       std::byte* mine, std::span<const std::size_t> offsets,
                       std::span<const std::size_t> lengths, int root, std::size_t call_bytes,
                       FunctionRef<std::string()> what);

/// reduce_scatter(v) in one step: every rank publishes all its `bytes` of input and reduces, in
/// rank order, the `count` elements from `offset` bytes of every slot into `output` (fp carries
/// the dtype and op).
Status reduce_scatter_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* input,
                               std::size_t bytes, void* output, std::size_t offset,
                               std::size_t count, FunctionRef<std::string()> what);
/// alltoall in one step: every rank publishes its size() blocks of `block` bytes and copies
/// block `rank` of every slot into its output, in place too.
Status alltoall_in_slots(CommImpl& impl, const CallFingerprint& fp, const void* input,
                         std::size_t block, void* output, FunctionRef<std::string()> what);

/// Whether gather, scatter or alltoall with blocks of up to `block` bytes (the largest, the
/// same on every rank) read them where they lie (move_by_reading): a host whose ranks can read
/// each other's memory, blocks past what the slots' two copies move faster, and where one rank
/// gathers every block (`root_reads_all`: gather) not so large that the messages' two-sided
/// copies win.
bool reads_take_moves(CommImpl& impl, std::size_t block, bool root_reads_all);
/// Whether a gather or scatter whose root holds `root_bytes` in all goes through the slots,
/// where it fits them, rather than by reads_take_moves: in a crowded job whose reads are slow
/// (SharedSlots::reads_slowly), up to 1 MiB.
bool slots_before_reads(const CommImpl& impl, std::size_t root_bytes);

/// The first part of a block of `bytes` that a rooted call's root moves itself where the
/// block's own rank moves the rest (move_by_reading in gather, scatter and broadcast): 1/size
/// of it, whole cache lines, so that the two sides copy at once and neither waits idle.
inline std::size_t root_share(std::size_t bytes, int size) {
  return bytes / static_cast<std::size_t>(size) / 64 * 64;
}

/// Whether a broadcast of `bytes` (or an allgather of `bytes` blocks: `read_all`) has its
/// ranks read what they need where it lies (move_by_reading): a host whose ranks can read each
/// other's memory, from the size where one read beats the slots' two copies up to where the
/// messages, whose senders and receivers share the copying, win.
bool reads_take_copies(CommImpl& impl, std::size_t bytes, bool read_all);

/// The single-copy form of the collectives that only move bytes (and of the 2-rank reduce):
/// every rank publishes the addresses of its buffers `mine` in the slots (as many on every
/// rank, at most 4), body(slots, addresses) moves its part with slots.read_peer (and
/// write_peer, into a buffer a peer published for it), rank r's i-th address being
/// addresses[r * mine.size() + i], and a last meet keeps every buffer unchanged until every
/// rank is done with it.
Status move_by_reading(
    CommImpl& impl, const CallFingerprint& fp, std::initializer_list<const void*> mine,
    const std::function<std::string()>& what,
    const std::function<Status(SharedSlots&, std::span<const std::uint64_t>)>& body);

}  // namespace hoop::collectives
