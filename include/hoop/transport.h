/// @file
/// The transport contract: point-to-point byte movement between the ranks of one job over one
/// fabric (tcp, shm, ucx, cuda, mpi). Algorithms see only this interface; a transport knows
/// nothing of collectives.
///
/// Ordering: between one pair of ranks, messages are ordered per direction. The k-th receive a
/// rank posts for peer p matches the k-th send p posted to it, and the two lengths must be
/// equal (a difference is a protocol_error naming the peer and both lengths).
///
/// Progress is driven by the caller: wait() and test() move bytes for every pending request of
/// the transport, not only the ones asked about, so a rank blocked on one peer keeps serving
/// the others. Nothing blocks without a deadline.
///
/// Failure: a peer that disconnects or dies fails every pending and later request that
/// involves it with peer_lost naming that rank; abort() (called by the first rank to see a
/// failure) fails everything locally and tells every peer the cause, so the whole job fails
/// with the original cause rather than a chain of secondary "connection closed" errors.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hoop/core.h"

namespace hoop {

/// The clock every deadline in hoop is read on.
using Clock = std::chrono::steady_clock;
/// A deadline: the time point on Clock past which a call gives up.
using Deadline = Clock::time_point;

/// Identifies a posted send or receive until it has been waited for.
using RequestId = std::uint64_t;

/// `bytes` bytes at `address`, in this process or (read_peer_pieces) a peer's.
struct MemoryPiece {
  std::uintptr_t address = 0;  ///< where the piece starts
  std::size_t bytes = 0;       ///< its length
};

/// Memory that every rank of a transport reads directly (shared memory on one host), for small
/// collectives that need no messages: each rank writes its own slot, publishes it, and reads
/// the other ranks' slots where they are. A rank has two slots, and may have small_slots()
/// small ones besides; a call takes one slot of either kind, and each kind is used in turn, so
/// a slot is rewritten two calls (small_slots() small calls) after it was written. The callers'
/// contract (collectives/algorithms/one_host.h) makes that safe: a rank rewrites a slot only
/// once every rank has finished reading it, and learns that from the calls the ranks have
/// published since. Calls are numbered 1, 2, ... alike on every rank, and a call's number is in
/// one slot of each rank. Not thread-safe; the transport's send/recv requests and the slots may
/// be used in turn.
class SharedSlots {
 public:
  virtual ~SharedSlots() = default;

  /// Bytes of one slot (every rank's alike: the narrowest rank's).
  virtual std::size_t slot_bytes() const = 0;
  /// Bytes of a slot the collectives fill unless the job is crowded and reads_slowly(), for
  /// slots made wider for such jobs (the shm transport's where its size was left unset): at
  /// most slot_bytes(), every rank's alike.
  virtual std::size_t default_slot_bytes() const { return slot_bytes(); }
  /// Bytes of one small slot (every rank's alike); 0 where there are none.
  virtual std::size_t small_slot_bytes() const = 0;
  /// How many small slots each rank has (0: none).
  virtual std::size_t small_slots() const = 0;
  /// This rank's slot for call `seq` (a small one where `small`), to fill before
  /// publish(seq, small); 8-byte aligned, and its first 56 bytes share a cache line with what
  /// publish() writes.
  virtual std::byte* own_slot(std::uint64_t seq, bool small = false) = 0;
  /// Makes this rank's slot of call `seq` (a small one where `small`) visible to every rank.
  virtual void publish(std::uint64_t seq, bool small = false) = 0;
  /// Waits until every rank has published call `seq`, in a slot of either kind; slots[r]
  /// (size() entries) then points at rank r's slot (this rank's own included), valid until
  /// its owner rewrites it. Fails with the cause when a peer died, shut down or aborted; past
  /// `deadline` with a timeout_error naming the ranks that did not publish (and aborts the
  /// transport).
  virtual Status gather(std::uint64_t seq, std::span<const std::byte*> slots,
                        Deadline deadline) = 0;
  /// As gather(), for one rank's slot alone (a rooted call's receiver needs only the root's):
  /// waits until `peer` has published call `seq` and returns where its slot is, valid as
  /// gather()'s are. Fails as gather() does, naming `peer`.
  virtual Result<const std::byte*> gather_one(std::uint64_t seq, int peer,
                                              Deadline deadline) = 0;

  /// Whether read_peer() works between every pair of ranks (the same answer on every rank).
  virtual bool can_read_peers() const = 0;
  /// Whether read_peer() works but some rank's set-up measured it at under half memcpy's speed,
  /// so that the slots' copies pay for longer (the same answer on every rank).
  virtual bool reads_slowly() const { return false; }
  /// Copies `bytes` bytes at `remote`, an address in `peer`'s memory that the peer published
  /// and keeps unchanged meanwhile, into `local`, in one copy (Linux cross-memory attach).
  virtual Status read_peer(int peer, const void* remote, void* local, std::size_t bytes) = 0;
  /// read_peer for memory in pieces: copies `remote` (`peer`'s pieces, in order) into `local`
  /// (this rank's, in order), which cover the same number of bytes, in one copy.
  virtual Status read_peer_pieces(int peer, std::span<const MemoryPiece> remote,
                                  std::span<const MemoryPiece> local) = 0;
  /// The other way: copies `bytes` bytes at `local` to `remote`, an address in `peer`'s memory
  /// that the peer published for it and leaves alone meanwhile, in one copy. Works between the
  /// ranks read_peer() works between.
  virtual Status write_peer(int peer, const void* local, void* remote, std::size_t bytes) = 0;
};

/// One rank's connections to all the other ranks of a job over one fabric.
class Transport {
 public:
  virtual ~Transport() = default;

  /// Short name ("tcp", "shm", ...), used in tables and error messages.
  virtual std::string_view name() const = 0;
  /// This rank, among the ranks the transport connects.
  virtual int rank() const = 0;
  /// The number of ranks the transport connects.
  virtual int size() const = 0;
  /// Whether send/recv accept device (GPU) pointers.
  virtual bool accepts_device_memory() const = 0;

  /// Starts sending `bytes` bytes at `data` to `peer` (!= rank()). The buffer must stay valid
  /// and unchanged until the request completes. Zero-byte messages are allowed and ordered.
  virtual Result<RequestId> send(int peer, const void* data, std::size_t bytes) = 0;
  /// As send(), and another send to `peer` follows at once: the transport may hold this one
  /// back to write both together (TCP: one system call for a header and its data). Any later
  /// send, wait, test or poll puts it on its way.
  virtual Result<RequestId> send_more(int peer, const void* data, std::size_t bytes) {
    return send(peer, data, bytes);
  }
  /// As send(), for one side of an exchange: the peer posts the matching receive without first
  /// waiting for this send to complete (both sides post their receives, then wait for all).
  /// The transport may then complete the send only once the peer has taken the data: shm lets
  /// the receiver read it where it lies (one copy). A plain send() completes without the peer.
  virtual Result<RequestId> send_lent(int peer, const void* data, std::size_t bytes) {
    return send(peer, data, bytes);
  }
  /// As send(), for a one-way hop (a tree's or chain's, a gather's or scatter's message) whose
  /// receiver posts the matching receive without first waiting for this send to complete: the
  /// transport may hold the data back until then (TCP leaves a large one in the socket, so the
  /// receiver reads it once, straight into its buffer, instead of staging it). Unlike
  /// send_lent(), this rank receives nothing meanwhile, so the receiver should not be left to
  /// copy alone (shm keeps such sends in its rings, where both sides copy).
  virtual Result<RequestId> send_awaited(int peer, const void* data, std::size_t bytes) {
    return send(peer, data, bytes);
  }
  /// Starts receiving exactly `bytes` bytes from `peer` into `data`, which must stay valid
  /// until the request completes.
  virtual Result<RequestId> recv(int peer, void* data, std::size_t bytes) = 0;

  /// Drives progress until every request in `ids` has completed or `deadline` passes. Returns
  /// the first failure among them (the requests are consumed either way); timeout_error names
  /// the peers still outstanding.
  virtual Status wait(std::span<const RequestId> ids, Deadline deadline) = 0;
  /// Drives progress without blocking; true once `id` has completed (it is then consumed),
  /// the request's error if it failed.
  virtual Result<bool> test(RequestId id) = 0;

  /// Moves bytes for the pending requests, sleeping up to `timeout` until some connection is
  /// ready or wake() is called; never fails (failures land on the requests, where test() and
  /// wait() report them). For a caller that waits for messages and for its own work at once.
  virtual void poll(std::chrono::microseconds timeout) = 0;
  /// Ends a poll() or await_activity() in progress on another thread (or the next one) early.
  /// Thread-safe.
  virtual void wake() = 0;
  /// Sleeps up to `timeout` until wake() is called or, with `messages`, a message may have
  /// arrived, without moving bytes, so that another thread may use the requests meanwhile (it
  /// may also return for nothing). Without `messages` the peers need not signal this rank at
  /// all (which costs them a system call per message). False, at once, where the transport
  /// cannot wait that way: poll() is then the only way to wait for messages.
  virtual bool await_activity(std::chrono::microseconds timeout, bool messages) {
    (void)timeout;
    (void)messages;
    return false;
  }

  /// Fails every pending and later request with `cause` and sends `cause` to every reachable
  /// peer, whose own pending and later requests then fail with it. Idempotent.
  virtual void abort(const Status& cause) = 0;

  /// The slots every rank of this transport reads directly, or null where ranks reach each
  /// other only through messages (any peer on another host).
  virtual SharedSlots* shared_slots() { return nullptr; }
};

/// Waits for one request (see Transport::wait).
inline Status wait_one(Transport& t, RequestId id, Deadline deadline) {
  return t.wait(std::span<const RequestId>(&id, 1), deadline);
}

}  // namespace hoop
