// The shared-memory transport's shared slots (hoop::SharedSlots): each rank's two slots live in
// its own segment, which every peer has mapped, so a rank publishes by storing the call number
// after the data and a peer reads the data in place once it sees that number. A call moves no
// message and makes no system call unless a peer sleeps.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>

#include "core/cpu_relax.h"
#include "transports/shm/shm_conn.h"
#include "transports/shm/shm_peers.h"

namespace hoop::shm {
namespace {

const std::byte* slot_data(const SlotHeader* s) {
  return reinterpret_cast<const std::byte*>(s) + kSlotDataOffset;
}

// Turns of the polling loop between two looks at the clock, the peers and the abort slot: a
// clock read costs about as much as the poll itself.
constexpr unsigned kCheckEvery = 64;

}  // namespace

SlotHeader* ShmTransport::own_slot_header(std::uint64_t seq, bool small) const {
  return small ? own_.small_slot(seq % small_slots_) : own_.slot(static_cast<int>(seq & 1));
}

std::byte* ShmTransport::own_slot(std::uint64_t seq, bool small) {
  return reinterpret_cast<std::byte*>(own_slot_header(seq, small)) + kSlotDataOffset;
}

void ShmTransport::publish(std::uint64_t seq, bool small) {
  own_slot_header(seq, small)->seq.store(seq, std::memory_order_release);
  // Pairs with doze()'s sleep_fence: a peer that raised its sleeping flag before this point is
  // rung, one that raises it later sees the slot in its last look before sleeping.
  publish_fence(sleepers_use_barrier_);
  for (auto& p : peers_) {
    SegmentHeader& h = *p->segment.header();
    if (h.sleeping.load(std::memory_order_relaxed) != 0) ring_doorbell(h, true);
  }
}

const SlotHeader* ShmTransport::published(const Peer& p, std::uint64_t seq) const {
  // The caller's call decides the kind of slot, alike on every rank of a matching call.
  const SlotHeader* s = p.slots[seq & 1];
  if (s->seq.load(std::memory_order_acquire) == seq) return s;
  if (p.small == nullptr || small_slots_ == 0) return nullptr;
  s = reinterpret_cast<const SlotHeader*>(p.small + seq % small_slots_ * small_stride_);
  return s->seq.load(std::memory_order_acquire) == seq ? s : nullptr;
}

// Inline into gather and gather_one: their common case, every slot there at once, is a few
// dozen instructions, about what a call into this function cost.
[[gnu::always_inline]] inline Status ShmTransport::await_slots(std::uint64_t seq,
                                                               std::span<const std::byte*> slots,
                                                               Deadline deadline, int only) {
  // A peer's abort wins even over slots that are all there: the call has failed elsewhere.
  check_remote_abort();
  if (!aborted_.ok()) return aborted_;
  // The first look keeps no waiting list: most gathers find every slot there already (a rooted
  // call's reader behind its root, the last rank to arrive).
  missing_.clear();
  auto take = [&](const Peer& p) {
    if (const SlotHeader* s = published(p, seq)) {
      slots[static_cast<std::size_t>(p.rank)] = slot_data(s);
    } else {
      missing_.push_back(p.rank);
    }
  };
  if (only >= 0) {
    take(*by_rank_[static_cast<std::size_t>(only)]);
  } else {
    for (auto& p : peers_) take(*p);
  }
  if (missing_.empty()) return Status::success();
  return wait_for_missing(seq, slots, deadline);
}

Status ShmTransport::gather(std::uint64_t seq, std::span<const std::byte*> slots,
                            Deadline deadline) {
  if (slot_bytes_ == 0 || slots.size() != static_cast<std::size_t>(size_))
    return invalid_argument(
        fmt::format("shm: gather of call {} over {} slots on a transport of {} ranks{}", seq,
                    slots.size(), size_, slot_bytes_ == 0 ? " without shared slots" : ""));
  // This rank published the call before it gathers it, in one kind of slot or the other.
  const bool small =
      small_slots_ > 0 && own_slot_header(seq, false)->seq.load(std::memory_order_relaxed) != seq;
  slots[static_cast<std::size_t>(rank_)] = own_slot(seq, small);
  return await_slots(seq, slots, deadline);
}

Result<const std::byte*> ShmTransport::gather_one(std::uint64_t seq, int peer, Deadline deadline) {
  // Where there are slots, every rank is a peer (shm_connect.cc).
  if (slot_bytes_ == 0 || peer < 0 || peer >= size_ || peer == rank_)
    return invalid_argument(fmt::format("shm: rank {}: no shared slot of rank {} to gather{}",
                                        rank_, peer, slot_bytes_ == 0 ? " (no shared slots)" : ""));
  one_slots_.resize(static_cast<std::size_t>(size_));
  HOOP_RETURN_IF_ERROR(await_slots(seq, one_slots_, deadline, peer));
  return one_slots_[static_cast<std::size_t>(peer)];
}

[[gnu::noinline]] Status ShmTransport::wait_for_missing(std::uint64_t seq,
                                                        std::span<const std::byte*> slots,
                                                        Deadline deadline) {
  // Takes the ranks whose slot holds the call now; true once none is missing.
  auto look = [&] {
    std::erase_if(missing_, [&](int r) {
      const SlotHeader* s = published(*by_rank_[static_cast<std::size_t>(r)], seq);
      if (s == nullptr) return false;
      slots[static_cast<std::size_t>(r)] = slot_data(s);
      return true;
    });
    return missing_.empty();
  };
  // Read at the first check: most gathers end before it, and a clock read is not free.
  Clock::time_point spin_until{};
  for (unsigned turn = 1;; ++turn) {
    if (look()) return Status::success();
    // Requests of another call may still owe a peer bytes (a send bigger than the ring).
    if (!requests_.empty()) progress();
    if (turn % kCheckEvery != 0 && !crowded_) {
      cpu_relax();
      continue;
    }
    const auto now = Clock::now();
    if (spin_until == Clock::time_point{}) spin_until = now + spin_;
    check_remote_abort();
    check_peers_if_due(now);
    if (!aborted_.ok()) return aborted_;
    auto lost = [&]() -> const Peer* {
      for (int r : missing_) {
        const Peer* p = by_rank_[static_cast<std::size_t>(r)];
        if (!p->closed.ok()) return p;
      }
      return nullptr;
    };
    if (lost() != nullptr) {
      // A peer publishes before it says goodbye or exits: one that reached this call between
      // the last look and the check of the peers has its part here and is not lost (8 ranks
      // on 2 cores: a barrier failed naming a rank that had passed it and shut down).
      if (look()) return Status::success();
      if (const Peer* p = lost()) return p->closed;
    }
    if (now >= deadline) {
      const Status timeout = timeout_error(
          fmt::format("shm: rank {}: rank(s) {} did not reach collective call {} (shared slots) "
                      "before the deadline",
                      rank_, fmt::join(missing_, ", "), seq));
      abort(timeout);
      return timeout;
    }
    if (now < spin_until) {
      // Yielding hands the core to a rank that shares it, usually the one this rank waits for.
      ::sched_yield();
      continue;
    }
    const auto nap = std::min<Clock::duration>(deadline - now, transports::kPeerCheckInterval);
    if (doze(*own_header_, std::chrono::ceil<std::chrono::microseconds>(nap).count(), look))
      spin_until = Clock::now() + spin_;
  }
}

Result<const Peer*> ShmTransport::readable_peer(int peer) const {
  if (!reads_peers_ || peer < 0 || peer >= size_ || peer == rank_)
    return invalid_argument(fmt::format("shm: rank {} cannot read rank {}'s memory", rank_, peer));
  const Peer* p = by_rank_[static_cast<std::size_t>(peer)];
  if (!p->closed.ok()) return p->closed;
  return p;
}

Status ShmTransport::read_peer(int peer, const void* remote, void* local, std::size_t bytes) {
  HOOP_ASSIGN_OR_RETURN(const Peer* p, readable_peer(peer));
  const int err = read_memory_of(p->pid, remote, local, bytes);
  if (err == 0) return Status::success();
  return memory_failure(*p, err, bytes);
}

Status ShmTransport::read_peer_pieces(int peer, std::span<const MemoryPiece> remote,
                                      std::span<const MemoryPiece> local) {
  HOOP_ASSIGN_OR_RETURN(const Peer* p, readable_peer(peer));
  const int err = read_memory_of(p->pid, remote, local);
  if (err == 0) return Status::success();
  std::size_t bytes = 0;
  for (const MemoryPiece& m : local) bytes += m.bytes;
  return memory_failure(*p, err, bytes);
}

Status ShmTransport::write_peer(int peer, const void* local, void* remote, std::size_t bytes) {
  HOOP_ASSIGN_OR_RETURN(const Peer* p, readable_peer(peer));
  const int err = write_memory_of(p->pid, local, remote, bytes);
  if (err == 0) return Status::success();
  return memory_failure(*p, err, bytes, true);
}

Status ShmTransport::memory_failure(const Peer& p, int err, std::size_t bytes, bool write) {
  // A peer that aborted (for another rank's fault, say) posted its cause here before it let
  // its buffers go or exited: that cause is why the read failed, and the one to report.
  if (std::optional<Status> cause = posted_abort(*own_header_, "shm")) return *cause;
  if (err == ESRCH)
    return peer_lost(fmt::format("shm: rank {} (pid {}) exited while rank {} {} its memory", p.rank,
                                 p.pid, rank_, write ? "wrote" : "read"));
  return errno_error(fmt::format("shm: rank {} {} {} bytes of rank {}'s memory (pid {}) "
                                 "with {}",
                                 rank_, write ? "writing" : "reading", bytes, p.rank, p.pid,
                                 write ? "process_vm_writev" : "process_vm_readv"),
                     err);
}

}  // namespace hoop::shm
