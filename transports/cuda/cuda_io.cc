// The CUDA IPC transport's data path: slices copied into and out of the device rings, records
// published and slots released once their copies completed, the doorbell sleep, and what a
// peer's abort, goodbye or death does to the requests.
#include <fmt/format.h>

#include <optional>

#include "transports/cuda/cuda_conn.h"
#include "transports/shm/shm_peers.h"

namespace hoop::cuda {
namespace {

/// How long a rank waits for its own queued copies when a peer goes away.
constexpr std::chrono::seconds kDrainTimeout{10};

/// Whether the copy recorded on `lane`'s slot of record `n` has completed; a CUDA error is
/// returned as such.
Result<bool> copy_done(const Lane& lane, std::uint64_t n) {
  return lane.events[slot_of(n, lane.num_slots)].query();
}

}  // namespace

bool CudaTransport::progress() {
  check_remote_abort();
  if (!aborted_.ok()) return false;
  if (!device::set_device(device_).ok()) return false;
  bool moved = false;
  for (auto& p : peers_) {
    if (!p->closed.ok()) continue;
    moved |= publish_out(*p);
    moved |= issue_out(*p);
    moved |= release_in(*p);
    moved |= issue_in(*p);
    if (!aborted_.ok()) break;
  }
  return moved;
}

bool CudaTransport::publish_out(Peer& p) {
  OutLane& o = p.out;
  bool moved = false;
  while (o.finished < o.issued) {
    const Result<bool> done = copy_done(o, o.finished);
    if (!done.ok()) {
      abort(done.status().with_context(fmt::format("cuda: copying to rank {}", p.rank)));
      return true;
    }
    if (!*done) break;
    const auto [record, ends] = o.queued.front();
    o.queued.pop_front();
    o.records[slot_of(o.finished, o.num_slots)] = record;
    ++o.finished;
    o.ctl->head.store(o.finished, std::memory_order_release);
    if (ends != nullptr) complete(*ends);
    moved = true;
  }
  if (moved) shm::ring_doorbell(*p.segment.header());
  return moved;
}

bool CudaTransport::issue_out(Peer& p) {
  OutLane& o = p.out;
  bool moved = false;
  while (!o.sends.empty()) {
    if (!slot_free(o.issued, o.tail_seen, o.num_slots)) {
      o.tail_seen = o.ctl->tail.load(std::memory_order_acquire);
      if (!slot_free(o.issued, o.tail_seen, o.num_slots)) break;
    }
    Request& r = *o.sends.front();
    const std::uint64_t slot = slot_of(o.issued, o.num_slots);
    const std::uint64_t len = slice_length(r.bytes, o.front_offset, o.slice_bytes);
    Status s;
    if (len > 0) {
      s = device::copy(o.slots + slot * o.slice_bytes, r.data + o.front_offset, len,
                       o.stream.handle());
    }
    if (s.ok()) s = o.events[slot].record(o.stream.handle());
    if (!s.ok()) {
      abort(s.with_context(fmt::format("cuda: copying {} bytes to rank {}", len, p.rank)));
      return true;
    }
    const SliceRecord record{r.bytes, o.front_offset};
    o.front_offset += len;
    const bool last = o.front_offset >= r.bytes;
    o.queued.emplace_back(record, last ? &r : nullptr);
    ++o.issued;
    if (last) {
      o.sends.pop_front();
      o.front_offset = 0;
    }
    moved = true;
  }
  return moved;
}

bool CudaTransport::release_in(Peer& p) {
  InLane& in = p.in;
  bool moved = false;
  while (in.finished < in.issued) {
    const Result<bool> done = copy_done(in, in.finished);
    if (!done.ok()) {
      abort(done.status().with_context(fmt::format("cuda: copying from rank {}", p.rank)));
      return true;
    }
    if (!*done) break;
    ++in.finished;
    in.ctl->tail.store(in.finished, std::memory_order_release);
    Request* ends = in.completes.front();
    in.completes.pop_front();
    if (ends != nullptr) complete(*ends);
    moved = true;
  }
  if (moved) shm::ring_doorbell(*p.segment.header());
  return moved;
}

bool CudaTransport::issue_in(Peer& p) {
  InLane& in = p.in;
  bool moved = false;
  while (in.in_message || !in.recvs.empty()) {
    if (in.issued == in.head_seen) {
      in.head_seen = in.ctl->head.load(std::memory_order_acquire);
      if (in.issued == in.head_seen) break;
    }
    const std::uint64_t slot = slot_of(in.issued, in.num_slots);
    const SliceRecord record = in.records[slot];
    if (!record_follows(record, in.in_message, in.length, in.next_offset)) {
      abort(protocol_error(fmt::format(
          "cuda: rank {}'s ring to rank {} holds a record for bytes {} of a {}-byte message "
          "where bytes {} of {} were due (corrupted)",
          p.rank, rank_, record.offset, record.message_bytes, in.next_offset, in.length)));
      return true;
    }
    if (!in.in_message) {
      in.in_message = true;
      in.length = record.message_bytes;
      in.next_offset = 0;
      in.target = in.recvs.front();
      in.recvs.pop_front();
      if (in.target->bytes != in.length) {
        complete(*in.target, protocol_error(fmt::format(
                                 "cuda: rank {} sent a message of {} bytes but the matching "
                                 "receive on rank {} expects {} bytes",
                                 p.rank, in.length, rank_, in.target->bytes)));
        in.target = nullptr;
      }
    }
    const std::uint64_t len = slice_length(in.length, record.offset, in.slice_bytes);
    Status s;
    if (in.target != nullptr && len > 0) {
      s = device::copy(in.target->data + record.offset, in.slots + slot * in.slice_bytes, len,
                       in.stream.handle());
    }
    if (s.ok()) s = in.events[slot].record(in.stream.handle());
    if (!s.ok()) {
      abort(s.with_context(fmt::format("cuda: copying {} bytes from rank {}", len, p.rank)));
      return true;
    }
    in.next_offset += len;
    const bool last = in.next_offset >= in.length;
    in.completes.push_back(last ? in.target : nullptr);
    ++in.issued;
    if (last) {
      in.in_message = false;
      in.target = nullptr;
    }
    moved = true;
  }
  return moved;
}

bool CudaTransport::sleep(Clock::duration max, bool stop_on_wake) {
  const auto timeout_us = std::chrono::ceil<std::chrono::microseconds>(max).count();
  return shm::doze(*own_header_, timeout_us, [&] {
    return progress() || (stop_on_wake && wake_pending_.load(std::memory_order_relaxed));
  });
}

void CudaTransport::check_remote_abort() {
  if (!aborted_.ok()) return;
  // Passed on, as the shared-memory transport does: a rank may exit in order before the
  // origin's word reaches a peer still waiting on it.
  if (std::optional<Status> cause = shm::posted_abort(*own_header_, "cuda")) abort(*cause);
}

void CudaTransport::check_peers() {
  check_remote_abort();
  for (auto& p : peers_) {
    if (!p->closed.ok()) continue;
    const shm::PeerState state = shm::peer_state(*p->segment.header(), p->pidfd, p->pid);
    if (state == shm::PeerState::kGoodbye) {
      close_peer(*p, peer_lost(fmt::format("cuda: rank {} shut its transport down", p->rank)));
    } else if (state == shm::PeerState::kDied) {
      const Status cause = peer_lost(fmt::format(
          "cuda: rank {} (pid {}) exited without shutting its transport down (the process died)",
          p->rank, p->pid));
      close_peer(*p, cause);
      abort(cause);
    }
  }
}

void CudaTransport::drain_in(Peer& p) {
  if (!aborted_.ok() || !device::set_device(device_).ok()) return;
  issue_in(p);
  (void)device::synchronize(p.in.stream.handle(), Clock::now() + kDrainTimeout);
  release_in(p);
}

void CudaTransport::close_peer(Peer& p, const Status& why) {
  if (!p.closed.ok()) return;
  // What the peer published before its goodbye is in its ring and can still be delivered.
  drain_in(p);
  p.closed = why;
  // Sends are complete once published; what is still queued can no longer be.
  for (auto& [record, ends] : p.out.queued)
    if (ends != nullptr) complete(*ends, why);
  p.out.queued.clear();
  for (Request* r : p.out.sends) complete(*r, why);
  p.out.sends.clear();
  for (Request* r : p.in.completes)
    if (r != nullptr) complete(*r, why);
  p.in.completes.clear();
  for (Request* r : p.in.recvs) complete(*r, why);
  p.in.recvs.clear();
  if (p.in.target != nullptr) complete(*p.in.target, why);
  p.in.target = nullptr;
}

}  // namespace hoop::cuda
