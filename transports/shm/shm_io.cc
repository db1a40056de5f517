// The shared-memory transport's data path: streaming messages through the rings in pieces,
// the doorbell sleep, and what a peer's abort, goodbye or death does to the requests.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "transports/shm/shm_conn.h"
#include "transports/shm/shm_peers.h"

namespace hoop::shm {
namespace {

// The most bytes copied before the index is published: the other side starts copying the
// first piece while this side writes the next, and a large message never waits for the ring
// to drain completely.
constexpr std::uint64_t kMaxPieceBytes = 256 << 10;
// A length beyond this cannot be a real message: the ring holds garbage.
constexpr std::uint64_t kMaxMessageBytes = std::uint64_t{1} << 56;
// The top bit of a message's length marks a single-copy descriptor: its payload is the 8-byte
// address of the sender's buffer, whose length is the rest of the word.
constexpr std::uint64_t kLentBit = std::uint64_t{1} << 63;
constexpr std::uint64_t kAddressBytes = 8;

std::uint64_t piece_limit(std::uint64_t capacity) {
  return std::min(kMaxPieceBytes, capacity / 4 / kMessageAlign * kMessageAlign);
}

void copy_to_ring(char* ring, std::uint64_t capacity, std::uint64_t pos, const char* src,
                  std::uint64_t n) {
  const std::uint64_t at = pos % capacity;
  const std::uint64_t first = std::min(n, capacity - at);
  std::memcpy(ring + at, src, first);
  if (first < n) std::memcpy(ring, src + first, n - first);
}

void copy_from_ring(const char* ring, std::uint64_t capacity, std::uint64_t pos, char* dst,
                    std::uint64_t n) {
  const std::uint64_t at = pos % capacity;
  const std::uint64_t first = std::min(n, capacity - at);
  std::memcpy(dst, ring + at, first);
  if (first < n) std::memcpy(dst + first, ring, n - first);
}

/// The payload part of footprint bytes [from, from + n) of a message of `len` bytes, as an
/// offset into the payload and a length (the header and the padding carry no payload).
std::pair<std::uint64_t, std::uint64_t> payload_part(std::uint64_t from, std::uint64_t n,
                                                     std::uint64_t len) {
  const std::uint64_t begin =
      std::min(std::max(from, kMessageHeaderBytes) - kMessageHeaderBytes, len);
  const std::uint64_t end =
      std::min(std::max(from + n, kMessageHeaderBytes) - kMessageHeaderBytes, len);
  return {begin, end - begin};
}

/// Writes a message of `bytes` at `data` (footprint `fp`) into `o` and publishes it, if it fits
/// in the ring's free space without wrapping around: the small messages' path, one header store
/// and one copy, where the general loop in pump_out() works out pieces; false otherwise.
bool put_whole(OutRing& o, const char* data, std::uint64_t bytes, std::uint64_t fp) {
  const std::uint64_t at = o.head % o.capacity;
  if (at + fp > o.capacity || fp > piece_limit(o.capacity)) return false;
  if (o.capacity - (o.head - o.tail_seen) < fp) {
    o.tail_seen = o.ctl->tail.load(std::memory_order_acquire);
    if (o.capacity - (o.head - o.tail_seen) < fp) return false;
  }
  std::memcpy(o.data + at, &bytes, sizeof bytes);
  if (bytes > 0) std::memcpy(o.data + at + kMessageHeaderBytes, data, bytes);
  o.head += fp;
  o.ctl->head.store(o.head, std::memory_order_release);
  return true;
}

/// Reads the message at `in`'s tail into the first posted receive and consumes it, if it is an
/// ordinary message (not a single-copy descriptor) of the receive's length that is wholly in
/// the ring, unwrapped, and at most `piece` long: put_whole()'s other end (the caller rings the
/// sender's doorbell). False otherwise, with nothing consumed.
bool take_whole(InRing& in, std::uint64_t piece) {
  const std::uint64_t at = in.tail % in.capacity;
  std::uint64_t len = 0;
  std::memcpy(&len, in.data + at, sizeof len);
  Request* r = in.recvs.front();
  const std::uint64_t fp = footprint(len);
  if (len != r->bytes || fp > piece || at + fp > in.capacity || in.head_seen - in.tail < fp)
    return false;
  if (len > 0) std::memcpy(r->data, in.data + at + kMessageHeaderBytes, len);
  in.recvs.pop_front();
  in.tail += fp;
  in.ctl->tail.store(in.tail, std::memory_order_release);
  r->finish();
  return true;
}

Status length_mismatch(int sender, std::uint64_t sent, int receiver, std::uint64_t expected) {
  return protocol_error(fmt::format(
      "shm: rank {} sent a message of {} bytes but the matching receive on rank {} expects {} "
      "bytes",
      sender, sent, receiver, expected));
}

}  // namespace

bool ShmTransport::progress() {
  check_remote_abort();
  if (!aborted_.ok()) return false;
  bool moved = false;
  for (auto& p : peers_) {
    if (!p->out.sends.empty() || !p->out.lent.empty()) moved |= pump_out(*p);
    if (!p->in.recvs.empty() || p->in.in_message) moved |= pump_in(*p);
  }
  return moved;
}

bool ShmTransport::release_lent(Peer& p) {
  OutRing& o = p.out;
  if (o.lent.empty()) return false;
  o.tail_seen = o.ctl->tail.load(std::memory_order_acquire);
  bool moved = false;
  while (!o.lent.empty() && o.lent.front().end <= o.tail_seen) {
    complete(*o.lent.front().req);
    o.lent.pop_front();
    moved = true;
  }
  return moved;
}

bool ShmTransport::pump_out(Peer& p) {
  OutRing& o = p.out;
  const std::uint64_t piece = piece_limit(o.capacity);
  bool moved = release_lent(p);
  while (!o.sends.empty()) {
    Request& r = *o.sends.front();
    // A lent send puts only its address in the ring; the receiver reads the payload.
    const bool lent = r.lent;
    const std::uint64_t address = reinterpret_cast<std::uintptr_t>(r.data);
    const char* payload = lent ? reinterpret_cast<const char*>(&address) : r.data;
    const std::uint64_t payload_bytes = lent ? kAddressBytes : r.bytes;
    const std::uint64_t fp = footprint(payload_bytes);
    if (o.front_done == 0 && !lent && put_whole(o, r.data, r.bytes, fp)) {
      ring_doorbell(*p.segment.header());
      complete(r);
      o.sends.pop_front();
      moved = true;
      continue;
    }
    while (o.front_done < fp) {
      std::uint64_t free = o.capacity - (o.head - o.tail_seen);
      if (free < std::min(fp - o.front_done, piece)) {
        o.tail_seen = o.ctl->tail.load(std::memory_order_acquire);
        free = o.capacity - (o.head - o.tail_seen);
      }
      if (free == 0) return moved;
      // Sizes stay multiples of kMessageAlign on both sides, so `free` is one too and a
      // header always fits whole.
      const std::uint64_t n = std::min({free, fp - o.front_done, piece});
      if (o.front_done == 0) {
        const std::uint64_t len = lent ? (r.bytes | kLentBit) : r.bytes;
        copy_to_ring(o.data, o.capacity, o.head, reinterpret_cast<const char*>(&len), sizeof len);
      }
      const auto [off, len] = payload_part(o.front_done, n, payload_bytes);
      if (len > 0) {
        // The message starts at head - front_done; its payload kMessageHeaderBytes later.
        copy_to_ring(o.data, o.capacity, o.head + (kMessageHeaderBytes + off - o.front_done),
                     payload + off, len);
      }
      o.head += n;
      o.front_done += n;
      o.ctl->head.store(o.head, std::memory_order_release);
      ring_doorbell(*p.segment.header());
      moved = true;
    }
    if (lent) {
      o.lent.push_back({&r, o.head});
    } else {
      complete(r);
    }
    o.sends.pop_front();
    o.front_done = 0;
  }
  return moved;
}

bool ShmTransport::take_lent(Peer& p, std::uint64_t len, Request* target) {
  InRing& in = p.in;
  const std::uint64_t fp = footprint(kAddressBytes);
  if (in.head_seen - in.tail < fp) {
    in.head_seen = in.ctl->head.load(std::memory_order_acquire);
    if (in.head_seen - in.tail < fp) return false;
  }
  std::uint64_t address = 0;
  copy_from_ring(in.data, in.capacity, in.tail + kMessageHeaderBytes,
                 reinterpret_cast<char*>(&address), sizeof address);
  in.recvs.pop_front();
  Status failed;
  if (target->bytes != len) {
    complete(*target, length_mismatch(p.rank, len, rank_, target->bytes));
  } else if (const int err = read_memory_of(p.pid, reinterpret_cast<const void*>(address),
                                            target->data, len);
             err != 0) {
    failed = memory_failure(p, err, len);
    complete(*target, failed);
  } else {
    complete(*target);
  }
  // Consuming the descriptor tells the sender its buffer is free again.
  in.tail += fp;
  in.ctl->tail.store(in.tail, std::memory_order_release);
  ring_doorbell(*p.segment.header());
  // A read that failed leaves the sender's send unfinished in truth: the job cannot go on.
  if (!failed.ok()) abort(failed);
  return true;
}

bool ShmTransport::pump_in(Peer& p, bool read_lent) {
  InRing& in = p.in;
  const std::uint64_t piece = piece_limit(in.capacity);
  bool moved = false;
  while (true) {
    if (!in.in_message) {
      if (in.recvs.empty()) break;
      if (in.head_seen - in.tail < kMessageHeaderBytes) {
        in.head_seen = in.ctl->head.load(std::memory_order_acquire);
        if (in.head_seen - in.tail < kMessageHeaderBytes) break;
      }
      if (take_whole(in, piece)) {
        ring_doorbell(*p.segment.header());
        moved = true;
        continue;
      }
      std::uint64_t len = 0;
      copy_from_ring(in.data, in.capacity, in.tail, reinterpret_cast<char*>(&len), sizeof len);
      if ((len & kLentBit) != 0 && (len & ~kLentBit) <= kMaxMessageBytes) {
        if (!read_lent || !take_lent(p, len & ~kLentBit, in.recvs.front())) break;
        moved = true;
        if (!aborted_.ok()) return true;
        continue;
      }
      if (len > kMaxMessageBytes) {
        abort(protocol_error(fmt::format(
            "shm: rank {}'s ring to rank {} holds a message header of {} bytes (corrupted)", p.rank,
            rank_, len)));
        return true;
      }
      Request* r = in.recvs.front();
      in.recvs.pop_front();
      in.in_message = true;
      in.length = len;
      in.consumed = kMessageHeaderBytes;
      in.tail += kMessageHeaderBytes;
      in.target = r;
      if (r->bytes != len) {
        complete(*r, length_mismatch(p.rank, len, rank_, r->bytes));
        in.target = nullptr;
      }
      moved = true;
    }
    const std::uint64_t fp = footprint(in.length);
    if (in.consumed < fp) {
      std::uint64_t avail = in.head_seen - in.tail;
      if (avail < fp - in.consumed) {
        in.head_seen = in.ctl->head.load(std::memory_order_acquire);
        avail = in.head_seen - in.tail;
      }
      if (avail == 0) break;
      const std::uint64_t n = std::min({avail, fp - in.consumed, piece});
      const auto [off, len] = payload_part(in.consumed, n, in.length);
      if (in.target != nullptr && len > 0) {
        copy_from_ring(in.data, in.capacity, in.tail + (kMessageHeaderBytes + off - in.consumed),
                       in.target->data + off, len);
      }
      in.tail += n;
      in.consumed += n;
      moved = true;
    }
    if (in.consumed == fp) {
      if (in.target != nullptr) complete(*in.target);
      in.target = nullptr;
      in.in_message = false;
    }
    in.ctl->tail.store(in.tail, std::memory_order_release);
    ring_doorbell(*p.segment.header());
  }
  return moved;
}

bool ShmTransport::sleep(Clock::duration max, bool stop_on_wake) {
  const auto timeout_us = std::chrono::ceil<std::chrono::microseconds>(max).count();
  return doze(*own_header_, timeout_us, [&] {
    return progress() || (stop_on_wake && wake_pending_.load(std::memory_order_relaxed));
  });
}

bool ShmTransport::activity_waiting() const {
  if (own_header_->abort_state.load(std::memory_order_acquire) != kNoAbort) return true;
  for (const auto& p : peers_) {
    const RingControl& c = *p->in.ctl;
    if (c.head.load(std::memory_order_acquire) != c.tail.load(std::memory_order_acquire))
      return true;
  }
  return false;
}

bool ShmTransport::await_activity(std::chrono::microseconds timeout, bool messages) {
  if (messages) {
    doze(*own_header_, timeout.count(), [&] {
      return wake_pending_.load(std::memory_order_relaxed) || activity_waiting();
    });
  } else {
    // The sleeping count stays as it is, so the peers do not ring; wake() rings regardless.
    const std::uint32_t seen = own_header_->doorbell.load(std::memory_order_acquire);
    if (!wake_pending_.load(std::memory_order_acquire))
      sleep_on_doorbell(*own_header_, seen, timeout.count());
  }
  wake_pending_.store(false);
  return true;
}

void ShmTransport::check_remote_abort() {
  // Every poll comes here: the common case is one load, without building posted_abort's
  // optional Status.
  if (!aborted_.ok() || own_header_->abort_state.load(std::memory_order_acquire) != kAbortWritten)
      [[likely]]
    return;
  // Passed on even though its origin tells every rank too: this rank may exit (an orderly
  // goodbye) before the origin's word reaches a peer still waiting on it, and that peer must
  // report the cause, not the goodbye. The first cause written into a segment wins.
  if (std::optional<Status> cause = posted_abort(*own_header_, "shm")) abort(*cause);
}

void ShmTransport::check_peers() {
  // A peer that aborts and then exits posted its cause first: that cause, not its exit, is
  // what this rank reports.
  check_remote_abort();
  for (auto& p : peers_) {
    if (!p->closed.ok()) continue;
    const PeerState state = peer_state(*p->segment.header(), p->pidfd, p->pid);
    if (state == PeerState::kGoodbye) {
      close_peer(*p, peer_lost(fmt::format("shm: rank {} shut its transport down", p->rank)));
    } else if (state == PeerState::kDied) {
      const Status cause = peer_lost(fmt::format(
          "shm: rank {} (pid {}) exited without shutting its transport down (the process died)",
          p->rank, p->pid));
      close_peer(*p, cause);
      abort(cause);
    }
  }
}

void ShmTransport::close_peer(Peer& p, const Status& why) {
  if (!p.closed.ok()) return;
  // What the peer wrote before its goodbye is still in the ring and can be delivered.
  if (aborted_.ok()) pump_in(p);
  p.closed = why;
  for (Request* r : p.out.sends) complete(*r, why);
  p.out.sends.clear();
  // What the peer read before it left is delivered; a lent buffer it has not read by now it
  // never will.
  release_lent(p);
  for (const OutRing::Lent& l : p.out.lent) complete(*l.req, why);
  p.out.lent.clear();
  for (Request* r : p.in.recvs) complete(*r, why);
  p.in.recvs.clear();
  if (p.in.target != nullptr) complete(*p.in.target, why);
  p.in.target = nullptr;
}

}  // namespace hoop::shm
