// The shared-memory transport's internal state: requests, and per peer the two rings (the one
// this rank writes in the peer's segment, the one it reads in its own) with the requests
// queued on them (internal to transports/shm).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/fd.h"
#include "hoop/transport.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_transport.h"
#include "transports/skeleton.h"

namespace hoop::shm {

using transports::kPeerCheckInterval;

/// One posted send or receive.
struct Request : transports::RequestBase {
  bool lent = false;  // a send that goes by single copy (its address through the ring)
};

/// This rank's end of the ring it writes in a peer's segment.
struct OutRing {
  RingControl* ctl = nullptr;
  char* data = nullptr;
  std::uint64_t capacity = 0;
  std::uint64_t head = 0;        // bytes written (published or not)
  std::uint64_t tail_seen = 0;   // the receiver's tail when last read
  std::deque<Request*> sends;    // front() is being written
  std::uint64_t front_done = 0;  // bytes of front()'s footprint written
  // Sends gone by single copy whose descriptors end at `end` in the ring: each completes once
  // the receiver's tail reaches its end (it has read the payload).
  struct Lent {
    Request* req;
    std::uint64_t end;
  };
  std::deque<Lent> lent;
};

/// This rank's end of the ring a peer writes in this rank's segment.
struct InRing {
  RingControl* ctl = nullptr;
  char* data = nullptr;
  std::uint64_t capacity = 0;
  std::uint64_t tail = 0;       // bytes consumed (published or not)
  std::uint64_t head_seen = 0;  // the sender's head when last read
  std::deque<Request*> recvs;   // posted, not yet matched with a message
  // The message being read: its payload length and footprint, how much of the footprint is
  // consumed, and where it goes (null: a length mismatch, its bytes are discarded).
  bool in_message = false;
  std::uint64_t length = 0;
  std::uint64_t consumed = 0;
  Request* target = nullptr;
};

/// One local peer.
struct Peer {
  int rank = -1;
  int pid = -1;
  Fd pidfd;         // readable once the peer process has exited; invalid: not watched
  Segment segment;  // the peer's segment, mapped here
  OutRing out;
  InRing in;
  Status closed;  // not ok once the peer is gone (orderly or not)
  const SlotHeader* slots[2] = {nullptr, nullptr};  // the peer's shared slots, if any
  const char* small = nullptr;                      // the peer's first small slot, if any
  bool reads_us = false;  // the peer can read this rank's memory (its set-up verdict)
};

/// The Transport over the mapped segments of a finished set-up.
class ShmTransport final : public transports::Skeleton<Request>, public SharedSlots {
 public:
  ShmTransport(int rank, int size, const ShmOptions& options, Segment own,
               std::vector<std::unique_ptr<Peer>> peers);
  ~ShmTransport() override;

  std::string_view name() const override { return "shm"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool accepts_device_memory() const override { return false; }
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override {
    return post_send(peer, data, bytes, false);
  }
  Result<RequestId> send_lent(int peer, const void* data, std::size_t bytes) override {
    return post_send(peer, data, bytes, true);
  }
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override;
  void wake() override;
  bool await_activity(std::chrono::microseconds timeout, bool messages) override;
  void abort(const Status& cause) override;
  SharedSlots* shared_slots() override { return slot_bytes_ > 0 ? this : nullptr; }

  // SharedSlots (shm_slots.cc).
  std::size_t slot_bytes() const override { return slot_bytes_; }
  std::size_t default_slot_bytes() const override { return default_slot_bytes_; }
  std::size_t small_slot_bytes() const override { return small_slots_ > 0 ? kSmallSlotBytes : 0; }
  std::size_t small_slots() const override { return small_slots_; }
  std::byte* own_slot(std::uint64_t seq, bool small = false) override;
  void publish(std::uint64_t seq, bool small = false) override;
  Status gather(std::uint64_t seq, std::span<const std::byte*> slots, Deadline deadline) override;
  Result<const std::byte*> gather_one(std::uint64_t seq, int peer, Deadline deadline) override;
  bool can_read_peers() const override { return reads_peers_; }
  bool reads_slowly() const override { return reads_slowly_; }
  Status read_peer(int peer, const void* remote, void* local, std::size_t bytes) override;
  Status write_peer(int peer, const void* local, void* remote, std::size_t bytes) override;
  Status read_peer_pieces(int peer, std::span<const MemoryPiece> remote,
                          std::span<const MemoryPiece> local) override;

 private:
  // shm_transport.cc
  Result<Peer*> check_peer(int peer, const void* data, std::size_t bytes);
  void complete(Request& req) { req.finish(); }
  void complete(Request& req, const Status& why) { req.finish(why); }

  // shm_io.cc
  /// Moves what every ring allows now; true when bytes moved or a request completed.
  bool progress() override;
  bool pump_out(Peer& p);
  /// With `read_lent` false it stops at a single-copy message: recv() leaves that read to the
  /// wait, so that a sendrecv's own send is posted (and read by the peer) meanwhile.
  bool pump_in(Peer& p, bool read_lent = true);
  /// send() and send_lent().
  Result<RequestId> post_send(int peer, const void* data, std::size_t bytes, bool lend);
  /// Whether a send_lent() of `bytes` to `p` goes by single copy (its address through the
  /// ring): from read_bytes up, to a receiver that can read this rank's memory. Only an
  /// exchange's sends may wait for their receiver: code that sends and waits before it posts
  /// its own receives relies on the ring taking the send at once. And a rank that only sends
  /// would sit idle while its peer made the one copy alone, where through the ring the two
  /// share the copying (a one-way 64 MiB broadcast: 7.9 ms through the ring, 13.9 ms lent).
  bool lends(const Peer& p, std::uint64_t bytes) const {
    return read_bytes_ > 0 && bytes >= read_bytes_ && p.reads_us;
  }
  /// Completes the single-copy sends to `p` that the receiver has read; true if any.
  bool release_lent(Peer& p);
  /// Takes a single-copy descriptor of `len` bytes at the ring's tail for `target`: reads the
  /// payload from the sender's memory and consumes the descriptor; false while it is not
  /// wholly in the ring yet.
  bool take_lent(Peer& p, std::uint64_t len, Request* target);
  /// The cause of a failed cross-memory read (or, with `write`, write) of `bytes` of `p`'s
  /// memory (errno `err`).
  Status memory_failure(const Peer& p, int err, std::size_t bytes, bool write = false);
  /// The peer a read_peer* call reads, or why it cannot.
  Result<const Peer*> readable_peer(int peer) const;
  /// Sleeps on the own doorbell up to `timeout_us`, unless progress() moves something after
  /// the sleeping flag is raised (then returns true at once).
  bool sleep(Clock::duration max, bool stop_on_wake) override;
  bool shares_core() const override { return crowded_; }
  /// Whether a ring holds bytes this rank has not taken or a peer posted an abort; reads only
  /// what the peers write and what this rank publishes, so any thread may ask.
  bool activity_waiting() const;
  /// Adopts an abort cause a peer wrote into the own header.
  void check_remote_abort();
  /// Looks for peers that said goodbye or whose process exited.
  void check_peers() override;
  /// Fails what can no longer complete on `p`: all of it after a crash, or what its rings do
  /// not hold after a goodbye.
  void close_peer(Peer& p, const Status& why);

  int rank_;
  int size_;
  Segment own_;
  SegmentHeader* own_header_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Peer*> by_rank_;  // size_ entries, null for ranks not in `peers`
  Status aborted_;
  std::size_t slot_bytes_ = 0;          // the narrowest rank's; 0: no shared slots
  std::size_t default_slot_bytes_ = 0;  // every rank's alike, at most slot_bytes_
  std::size_t small_slots_ = 0;   // every rank's small slots alike; 0: none
  std::size_t small_stride_ = 0;  // bytes from one small slot to the next
  std::size_t read_bytes_ = 0;  // ShmOptions::read_bytes
  // More ranks on this host than cores this process may run on: a waiting rank yields at once,
  // since the rank it waits for may need its core.
  bool crowded_ = false;
  // Every peer runs membarrier before it sleeps and this process is registered for it: a slot
  // is published without a fence (publish_fence).
  bool sleepers_use_barrier_ = false;
  bool reads_peers_ = false;  // every rank could read every other's memory (set-up's verdict)
  bool reads_slowly_ = false;  // and some rank measured its reads slow
  std::vector<int> missing_;  // await_slots' scratch: the ranks not yet seen
  std::vector<const std::byte*> one_slots_;  // gather_one's scratch, size_ entries

  // This rank's slot header for call `seq`, of the kind `small` says (shm_slots.cc).
  SlotHeader* own_slot_header(std::uint64_t seq, bool small) const;
  // Peer p's slot holding call `seq`, in either kind of slot, or null while it has not
  // published it (shm_slots.cc).
  const SlotHeader* published(const Peer& p, std::uint64_t seq) const;
  // Waits until every peer (or only rank `only`) has published call `seq`, setting slots[r]
  // for each (shm_slots.cc).
  Status await_slots(std::uint64_t seq, std::span<const std::byte*> slots, Deadline deadline,
                     int only = -1);
  // await_slots' wait for the ranks in missing_, apart from its first look: the common case,
  // every slot there at once, stays a short function.
  Status wait_for_missing(std::uint64_t seq, std::span<const std::byte*> slots, Deadline deadline);
};

}  // namespace hoop::shm
