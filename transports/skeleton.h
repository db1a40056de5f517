// The part every point-to-point transport shares: the request table, the wait (poll while
// bytes move and for `spin_` after they stop, then sleep until a peer signals), test() and
// poll() over it, the deadline's message and describe(). A transport derives from
// Skeleton<its Request> and supplies what is its own: a non-blocking progress pass, a sleep
// that a peer (or wake()) ends, and, where peers can die unseen, a peer check.
//
// The contract (hoop/transport.h) this keeps for every transport alike:
//   - wait() on an unknown or consumed id is invalid_argument naming the transport and the id;
//   - a wait past its deadline fails with timeout_error "<name>: rank R: N request(s) did not
//     complete before the deadline: <send of B bytes to rank P; ...>" (at most 8 named) and
//     aborts the transport, unless a cause that is already here (a peer's abort, a lost peer)
//     finishes the requests first, which explains the wait better than this rank's deadline;
//   - peers are checked at most every kPeerCheckInterval, also while bytes move (other peers'
//     traffic must not hide one that died).
#pragma once

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "core/coarse_clock.h"
#include "core/cpu_relax.h"
#include "core/request_table.h"
#include "core/requests.h"
#include "hoop/transport.h"

namespace hoop::transports {

/// How often a waiting transport looks at its peers (and how long it sleeps at most at once,
/// so that a peer that died without a word is noticed).
inline constexpr std::chrono::milliseconds kPeerCheckInterval{10};
/// Progress passes between two clock reads of a wait that polls alone on its core.
inline constexpr unsigned kPollsPerClockRead = 64;

/// What every transport keeps per request; a transport's Request adds its own fields.
struct RequestBase {
  int peer = -1;
  bool is_send = false;
  bool done = false;
  char* data = nullptr;
  std::size_t bytes = 0;
  Status status;  // the first failure

  /// Marks the request finished, successfully.
  void finish() { done = true; }
  /// Marks the request finished with `why`, unless an earlier failure is its status already
  /// (a success copies no Status: the common case of the small messages' path).
  void finish(const Status& why) {
    done = true;
    if (!why.ok() && status.ok()) status = why;
  }
};

template <typename Request>
class Skeleton : public Transport {
 public:
  Status wait(std::span<const RequestId> ids, Deadline deadline) override;
  Result<bool> test(RequestId id) override;
  void poll(std::chrono::microseconds timeout) override;

 protected:
  Skeleton() = default;

  // What each transport supplies.

  /// One pass over the transport's work without blocking; true when bytes moved or a request
  /// finished.
  virtual bool progress() = 0;
  /// Blocks up to `max` until a peer signals (with `stop_on_wake`, also until wake()); true
  /// when bytes moved meanwhile, so that the wait spins again.
  virtual bool sleep(Clock::duration max, bool stop_on_wake) = 0;
  /// Looks for peers that aborted, said goodbye or died; every kPeerCheckInterval at most.
  virtual void check_peers() {}
  /// Whether the request has finished (successfully or not).
  virtual bool finished(const Request& r) const { return r.done; }
  /// Called once when a wait begins, with the requests it is for.
  virtual void begin_wait(std::span<const RequestId> /*ids*/) {}
  /// A polling pass of a wait; by default progress().
  virtual bool spin_once() { return progress(); }
  /// True while a wait must poll rather than sleep (work that no peer will signal the end of).
  virtual bool must_poll() const { return false; }
  /// Whether this rank may share its core with a peer it waits for (then a waiting rank yields
  /// the core between polls); true unless the transport knows better.
  virtual bool shares_core() const { return true; }
  /// The longest single sleep of a wait or poll.
  virtual Clock::duration sleep_slice() const { return kPeerCheckInterval; }
  /// A peer as messages name it.
  virtual std::string peer_name(int peer) const { return fmt::format("rank {}", peer); }
  /// Frees what the transport still holds for a request that a timeout drops.
  virtual void release(Request& /*r*/) {}
  /// What a timed-out wait returns once the timeout has aborted the transport.
  virtual Status timeout_status(const Status& timeout) { return timeout; }

  /// "send of B bytes to rank P" / "receive of B bytes from rank P".
  std::string describe(const Request& r) const {
    return fmt::format("{} {} bytes {} {}", r.is_send ? "send of" : "receive of", r.bytes,
                       r.is_send ? "to" : "from", peer_name(r.peer));
  }
  /// Whether a send has not finished. A transport destroyed then owes its peers bytes and
  /// aborts, so that they learn why at once; receives alone need only the goodbye (a rank that
  /// shuts down between collectives has its next receives posted, and its peers must not read
  /// that as a failure).
  bool sends_pending() const {
    return requests_.any_of([this](const Request& r) { return r.is_send && !finished(r); });
  }
  /// Adds a request for `bytes` at `data` to (`is_send`) or from `peer`: its id, and the
  /// request, which stays in place until a wait or test consumes it.
  std::pair<RequestId, Request&> add_request(int peer, bool is_send, const void* data,
                                             std::size_t bytes) {
    auto added = requests_.add();
    Request& r = added.second;
    r.peer = peer;
    r.is_send = is_send;
    r.data = static_cast<char*>(const_cast<void*>(data));
    r.bytes = bytes;
    return added;
  }
  /// check_peers() when it is due.
  void check_peers_if_due(Clock::time_point now) {
    if (now < next_peer_check_) return;
    next_peer_check_ = now + kPeerCheckInterval;
    check_peers();
  }

  RequestTable<Request> requests_;
  std::chrono::microseconds spin_{0};
  std::atomic<bool> wake_pending_{false};  // set by wake(), taken by poll()

 private:
  /// Names the unfinished requests of `ids` in a timeout_error, aborts the transport with it
  /// and drops `ids`.
  Status timed_out(std::span<const RequestId> ids);

  Clock::time_point next_peer_check_{};
};

template <typename Request>
Status Skeleton<Request>::wait(std::span<const RequestId> ids, Deadline deadline) {
  HOOP_RETURN_IF_ERROR(check_requests_known(requests_, ids, name()));
  begin_wait(ids);
  std::size_t next = 0;  // requests before `next` are known finished
  // Polling goes on while bytes keep moving and for spin_ after they stop: a sleep costs a
  // scheduler wake-up, which is longer than most transfers between ranks of one host. The spin
  // starts at the wait's first clock read, not before the first poll: a clock read costs about
  // a tenth of a small shared-memory message, which is often done by then.
  Clock::time_point spin_until = Clock::time_point::max();
  // Alone on its core, a waiting rank polls between clock reads instead of yielding: both a
  // clock read and a sched_yield cost about as much as a message between two ranks of a host.
  const bool alone = !shares_core();
  bool moved = false;
  for (unsigned turn = 1;; ++turn) {
    while (next < ids.size() && finished(requests_.at(ids[next]))) ++next;
    if (next == ids.size()) break;
    if (alone && turn % kPollsPerClockRead != 0) {
      if (spin_once()) {
        moved = true;
      } else {
        cpu_relax();
      }
      continue;
    }
    const auto now = Clock::now();
    if (moved || spin_until == Clock::time_point::max()) spin_until = now + spin_;
    moved = false;
    if (now >= deadline) {
      progress();
      if (!finished(requests_.at(ids[next]))) return timed_out(ids);
      continue;
    }
    check_peers_if_due(now);
    if (spin_once()) {
      spin_until = now + spin_;
      continue;
    }
    if (now < spin_until || must_poll()) {
      // Yielding hands the core to a rank that shares it (more ranks than cores), which is
      // usually the one this rank waits for; alone on a core it returns at once.
      ::sched_yield();
      continue;
    }
    if (sleep(std::min<Clock::duration>(deadline - now, sleep_slice()), false)) {
      spin_until = Clock::now() + spin_;
    }
  }
  return consume_requests(requests_, ids);
}

template <typename Request>
Result<bool> Skeleton<Request>::test(RequestId id) {
  return test_request(
      requests_, id, name(), [this](const Request& r) { return finished(r); },
      [this] {
        progress();
        // A poll loop tests often (the runtime's tests every peer's receive each pass): the
        // coarse clock is precise enough for a check every kPeerCheckInterval.
        check_peers_if_due(coarse_now());
      });
}

template <typename Request>
void Skeleton<Request>::poll(std::chrono::microseconds timeout) {
  const Deadline deadline = Clock::now() + timeout;
  bool woken = wake_pending_.exchange(false);
  if (progress() || woken) return;
  while (true) {
    const auto now = Clock::now();
    check_peers_if_due(now);
    if (now >= deadline) return;
    if (must_poll()) {
      ::sched_yield();
      if (progress() || wake_pending_.exchange(false)) return;
      continue;
    }
    const bool moved = sleep(std::min<Clock::duration>(deadline - now, sleep_slice()), true);
    woken = wake_pending_.exchange(false);
    if (moved || woken) {
      progress();
      return;
    }
  }
}

template <typename Request>
Status Skeleton<Request>::timed_out(std::span<const RequestId> ids) {
  std::string outstanding;
  std::size_t count = 0;
  for (RequestId id : ids) {
    const Request& r = requests_.at(id);
    if (finished(r)) continue;
    if (count++ < 8) outstanding += (outstanding.empty() ? "" : "; ") + describe(r);
  }
  const Status timeout = timeout_error(
      fmt::format("{}: rank {}: {} request(s) did not complete before the deadline: {}{}", name(),
                  rank(), count, outstanding, count > 8 ? "; ..." : ""));
  abort(timeout);
  for (RequestId id : ids) {
    Request* r = requests_.find(id);
    if (r == nullptr) continue;
    release(*r);
    requests_.erase(id);
  }
  return timeout_status(timeout);
}

}  // namespace hoop::transports
