// The shared-memory transport's mapped layout (internal to transports/shm): one segment per
// rank, a header at its start, then one ring per peer that sends to the owner.
//
//   offset 0            SegmentHeader   identity, doorbell, sleeping flag, goodbye, abort cause
//   sizeof header       RingControl[n]  per sender: head and tail on their own cache lines
//   line aligned        slots[2]        the owner's shared slots (hoop::SharedSlots), if any
//   line aligned        small[k]        the owner's small shared slots, if any
//   page aligned        ring data[n]    ring_bytes each
//
// Every field that two processes write is a lock-free std::atomic in the shared pages (they are
// address-free on the platforms hoop supports). The owner initializes the whole header before
// it publishes the segment in the store; a peer reads the identity fields only after that, so
// they need no atomics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "hoop/core.h"

namespace hoop::shm {

inline constexpr std::uint64_t kSegmentMagic = 0x686f6f702d73686dULL;  // "hoop-shm"
inline constexpr std::uint32_t kLayoutVersion = 5;
/// Longest abort message a header carries; a longer one is cut.
inline constexpr std::size_t kMaxAbortText = 1024;
/// Smallest ring that HOOP_SHM_RING_BYTES may ask for.
inline constexpr std::size_t kMinRingBytes = std::size_t{64} << 10;
/// Destructive-interference distance, doubled: adjacent-line prefetchers pull pairs of lines.
inline constexpr std::size_t kLine = 128;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

/// A rank's verdict on cross-memory attach: it reads every peer's memory (kReadsPeersSlowly:
/// and its set-up measured such a read slower than kSlowReadRatio memcpys), or it cannot.
enum ReadsPeers : std::uint32_t { kReadsPeers = 1, kCannotReadPeers = 2, kReadsPeersSlowly = 3 };

/// Whether a ReadsPeers word says that its rank reads its peers' memory.
inline bool reads_peers_word(std::uint32_t verdict) {
  return verdict == kReadsPeers || verdict == kReadsPeersSlowly;
}

/// abort_state values: the first writer claims the slot, fills it, then marks it written.
enum AbortState : std::uint32_t { kNoAbort = 0, kAbortWriting = 1, kAbortWritten = 2 };

struct SegmentHeader {
  // Written once by the owner before the segment is published.
  std::uint64_t magic;
  std::uint32_t version;
  std::int32_t rank;
  std::int32_t pid;
  std::uint32_t num_rings;
  std::uint64_t total_bytes;
  // The owner's two shared slots: the first at board_offset, the second slot_stride later;
  // slot_bytes 0: none. default_slot_bytes (at most slot_bytes, the same on every rank) is what
  // the collectives fill where the slots are not filled whole (SharedSlots::default_slot_bytes).
  std::uint64_t board_offset;
  std::uint64_t slot_stride;
  std::uint64_t slot_bytes;
  std::uint64_t default_slot_bytes;
  // The owner's small slots: small_slots of them from small_offset, small_stride apart, of
  // small_bytes each; small_slots 0: none.
  std::uint64_t small_offset;
  std::uint64_t small_stride;
  std::uint64_t small_bytes;
  std::uint64_t small_slots;
  // Where the owner mapped this segment in its own address space: a peer reads the magic there
  // with process_vm_readv to learn whether cross-memory attach works between them.
  std::uint64_t owner_base;
  // 1 when the owner runs a host-wide barrier (membarrier) before it sleeps, so that a peer
  // that registered for it publishes without a fence of its own (see publish_fence).
  std::uint32_t sleeper_barrier;
  // The owner's verdict, written once it has mapped its peers: kReadsPeers (kReadsPeersSlowly)
  // when it could read every peer's memory, kCannotReadPeers otherwise (0: not yet known).
  alignas(kLine) std::atomic<std::uint32_t> reads_peers;
  // The futex word: peers bump it after they put bytes in a ring of this segment or free space
  // in a ring this segment's owner writes to, and wake the owner when it sleeps.
  alignas(kLine) std::atomic<std::uint32_t> doorbell;
  // The owner's threads that sleep (or are about to): a count, since two threads of the owner
  // may sleep at once (a background thread awaiting messages beside one that waits); peers
  // skip FUTEX_WAKE while it is 0.
  alignas(kLine) std::atomic<std::uint32_t> sleeping;
  // Set by the owner when it shuts its transport down in order (its exit is then no crash).
  alignas(kLine) std::atomic<std::uint32_t> goodbye;
  // The first abort cause any rank sent to this segment's owner.
  alignas(kLine) std::atomic<std::uint32_t> abort_state;
  std::int32_t abort_origin;
  std::uint32_t abort_code;
  std::uint32_t abort_len;
  char abort_text[kMaxAbortText];
};

/// One sender's ring in the receiver's segment. The sender writes `head` (bytes ever written),
/// the receiver `tail` (bytes ever consumed); data is at data_offset, capacity bytes.
struct RingControl {
  alignas(kLine) std::atomic<std::uint64_t> head;
  alignas(kLine) std::atomic<std::uint64_t> tail;
  alignas(kLine) std::int32_t sender;
  std::uint32_t reserved;
  std::uint64_t data_offset;
  std::uint64_t capacity;
};

/// One of the owner's shared slots: the call it holds (written last, with release order),
/// then, kSlotDataOffset bytes in, slot_bytes of data.
struct SlotHeader {
  std::atomic<std::uint64_t> seq;
};
inline constexpr std::size_t kSlotDataOffset = 8;
/// Bytes of a slot beyond the payload that ShmOptions::slot_bytes names, for the caller's own
/// header in front of it.
inline constexpr std::size_t kSlotReserve = 64;
/// Bytes of a small slot (hoop::SharedSlots::small_slot_bytes), the caller's header included:
/// the rooted calls whose payloads fit run ahead through them (the collectives take up to 8
/// KiB, where the ranks outnumber the cores; one_host.cc).
inline constexpr std::size_t kSmallSlotBytes = 8192 + kSlotReserve;

/// Every message in a ring starts with this header; payloads are padded to a multiple of
/// kMessageAlign so that the next header never straddles the wrap-around.
inline constexpr std::size_t kMessageHeaderBytes = 8;
inline constexpr std::size_t kMessageAlign = 8;

/// Bytes a message of `len` payload bytes occupies in a ring.
inline std::uint64_t footprint(std::uint64_t len) {
  return kMessageHeaderBytes + ((len + kMessageAlign - 1) & ~std::uint64_t{kMessageAlign - 1});
}

/// The bytes of a segment's two shared slots (kSlotReserve included; 0: none), and of the part
/// the collectives fill unless they fill them whole (SegmentHeader::default_slot_bytes).
struct SlotBytes {
  std::size_t bytes = 0;
  std::size_t default_bytes = 0;
};

/// A mapping of one segment, unmapped on destruction.
class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  ~Segment();

  /// Creates /dev/shm `name` (mode 0600, replacing a stale one) for `owner` with one ring of
  /// `ring_bytes` per rank in `senders`, two shared slots of `slots` (none by default) and,
  /// beside them, `small_slots` of kSmallSlotBytes, reserves its pages and initializes the
  /// header.
  static Result<Segment> create(const std::string& name, int owner, const int* senders,
                                std::size_t num_senders, std::size_t ring_bytes,
                                SlotBytes slots = {}, std::size_t small_slots = 0);
  /// Maps the existing segment `name` of rank `owner` and checks its header.
  static Result<Segment> open(const std::string& name, int owner);

  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base_); }
  /// The ring that `sender` writes to in this segment, or null.
  RingControl* ring_of(int sender) const;
  char* data(const RingControl& ring) const { return static_cast<char*>(base_) + ring.data_offset; }
  /// The owner's shared slot `which` (0 or 1); only where the header has slots.
  SlotHeader* slot(int which) const {
    const SegmentHeader& h = *header();
    return reinterpret_cast<SlotHeader*>(static_cast<char*>(base_) + h.board_offset +
                                         static_cast<std::size_t>(which) * h.slot_stride);
  }
  /// The owner's small slot `which` (below the header's small_slots).
  SlotHeader* small_slot(std::size_t which) const {
    const SegmentHeader& h = *header();
    return reinterpret_cast<SlotHeader*>(static_cast<char*>(base_) + h.small_offset +
                                         which * h.small_stride);
  }
  bool valid() const { return base_ != nullptr; }

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

/// The /dev/shm name (with its leading '/') of `rank`'s segment in mesh `key_prefix` of job
/// `job_id`: the mesh is a short hash of the prefix, so names stay short and valid.
std::string segment_name(const std::string& job_id, const std::string& key_prefix, int rank);

/// Registers this process for membarrier's global expedited command, the host-wide barrier
/// that lets publishers go without a fence (once per process; Segment::create calls it, so a
/// rank is registered before any peer can wait on its messages); false where the kernel or a
/// seccomp policy refuses.
bool register_sleeper_barrier();
namespace detail {
/// This process's standing with membarrier's global expedited command; a forked child's is
/// reset to kBarrierUnknown (register_sleeper_barrier).
enum BarrierState : int { kBarrierUnknown, kBarrierRegistered, kBarrierRefused };
extern std::atomic<int> barrier_state;
}  // namespace detail
/// Whether register_sleeper_barrier() succeeded in this process (a forked child starts
/// unregistered and registers again when it creates a segment). Inline: every publication asks.
inline bool uses_sleeper_barrier() {
  return detail::barrier_state.load(std::memory_order_relaxed) == detail::kBarrierRegistered;
}

/// What a publisher runs between publishing (a ring's head or tail, a slot) and reading
/// `header`'s sleeping count. A fence makes the store visible before the load (the sleeper
/// fences too, between raising the count and its last look): that fence waits for the store to
/// leave this core, most of a small message's cost. Where the sleeper runs membarrier instead
/// and this process is registered for it, the sleeper's barrier reaches this core wherever it
/// is, so only the compiler may not reorder the two. `sleeper_uses_barrier`: that holds for
/// every sleeper the publication concerns.
inline void publish_fence(bool sleeper_uses_barrier) {
  if (sleeper_uses_barrier) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}
/// publish_fence for a publication to `header`'s owner.
inline void publish_fence(const SegmentHeader& header) {
  publish_fence(header.sleeper_barrier != 0 && uses_sleeper_barrier());
}
/// What the owner of `own` runs between raising its sleeping count and its last look before
/// it sleeps: membarrier where its header says so, else a fence (pairs with publish_fence).
void sleep_fence(const SegmentHeader& own);

/// Rings `header`'s doorbell: bumps it and wakes its owner if it sleeps (or always, `force`).
void ring_doorbell(SegmentHeader& header, bool force = false);
/// Sleeps until `header`'s doorbell differs from `seen` or `timeout_us` passes.
void sleep_on_doorbell(SegmentHeader& header, std::uint32_t seen, std::int64_t timeout_us);

/// Writes `cause` into `header` unless an earlier cause is there already.
void post_abort(SegmentHeader& header, int origin, const Status& cause);

}  // namespace hoop::shm
