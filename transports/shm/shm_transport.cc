// The shared-memory transport's requests: posting, wait/test/poll, abort and shutdown.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/cores.h"
#include "transports/shm/shm_conn.h"
#include "transports/shm/shm_peers.h"

namespace hoop::shm {
ShmTransport::ShmTransport(int rank, int size, const ShmOptions& options, Segment own,
                           std::vector<std::unique_ptr<Peer>> peers)
    : rank_(rank),
      size_(size),
      own_(std::move(own)),
      own_header_(own_.header()),
      peers_(std::move(peers)),
      by_rank_(static_cast<std::size_t>(size), nullptr) {
  for (auto& p : peers_) by_rank_[static_cast<std::size_t>(p->rank)] = p.get();
  spin_ = options.spin;
  // Every rank wrote its verdict before the set-up's last store wait ended.
  for (auto& p : peers_)
    p->reads_us =
        reads_peers_word(p->segment.header()->reads_peers.load(std::memory_order_acquire));
  if (own_header_->slot_bytes > 0 && peers_.size() + 1 == static_cast<std::size_t>(size_)) {
    // Ranks that measured differently made slots of different sizes; connect() checked that
    // their default parts agree.
    slot_bytes_ = own_header_->slot_bytes;
    default_slot_bytes_ = own_header_->default_slot_bytes;
    for (auto& p : peers_) {
      slot_bytes_ = std::min<std::size_t>(slot_bytes_, p->segment.header()->slot_bytes);
      for (int i = 0; i < 2; ++i) p->slots[i] = p->segment.slot(i);
    }
    // connect() checked that every peer has as many small slots as this rank.
    small_slots_ = own_header_->small_slots;
    small_stride_ = own_header_->small_stride;
    if (small_slots_ > 0)
      for (auto& p : peers_) p->small = reinterpret_cast<const char*>(p->segment.small_slot(0));
    const std::uint32_t mine = own_header_->reads_peers.load(std::memory_order_acquire);
    reads_peers_ = reads_peers_word(mine);
    reads_slowly_ = mine == kReadsPeersSlowly;
    for (auto& p : peers_) {
      const std::uint32_t theirs = p->segment.header()->reads_peers.load(std::memory_order_acquire);
      reads_peers_ = reads_peers_ && reads_peers_word(theirs);
      reads_slowly_ = reads_slowly_ || theirs == kReadsPeersSlowly;
    }
    reads_slowly_ = reads_slowly_ && reads_peers_;
  }
  crowded_ = static_cast<int>(peers_.size()) + 1 > usable_cores();
  sleepers_use_barrier_ = uses_sleeper_barrier();
  for (auto& p : peers_) sleepers_use_barrier_ &= p->segment.header()->sleeper_barrier != 0;
  // lends() asks the peer's verdict too: the default's measurement is only where to start.
  read_bytes_ = options.read_bytes ? *options.read_bytes : default_read_bytes(crowded_);
}

ShmTransport::~ShmTransport() {
  if (sends_pending()) {
    abort(aborted(fmt::format("rank {} shut its shm transport down with sends pending", rank_)));
  }
  // Everything this rank sent is in the peers' rings already (a send completes once it is), so
  // the goodbye only tells the peers that the exit that follows is no crash.
  own_header_->goodbye.store(1, std::memory_order_release);
  for (auto& p : peers_) ring_doorbell(*p->segment.header(), true);
}

Result<Peer*> ShmTransport::check_peer(int peer, const void* data, std::size_t bytes) {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return invalid_argument(fmt::format(
        "shm: peer {} is not another rank of this job (rank {} of {})", peer, rank_, size_));
  }
  Peer* p = by_rank_[static_cast<std::size_t>(peer)];
  if (p == nullptr) {
    return invalid_argument(fmt::format(
        "shm: rank {} is not a shared-memory peer of rank {} (not on this host or not in the "
        "mesh)",
        peer, rank_));
  }
  if (data == nullptr && bytes > 0) return invalid_argument("shm: null buffer");
  if (!aborted_.ok()) return aborted_;
  return p;
}

Result<RequestId> ShmTransport::post_send(int peer, const void* data, std::size_t bytes,
                                          bool lend) {
  HOOP_ASSIGN_OR_RETURN(Peer * p, check_peer(peer, data, bytes));
  auto [id, req] = add_request(peer, true, data, bytes);
  req.lent = lend && lends(*p, bytes);
  if (!p->closed.ok()) {
    complete(req, p->closed);
    return id;
  }
  p->out.sends.push_back(&req);
  // Eager: a message that fits is in the peer's ring before send() returns.
  if (p->out.sends.size() == 1) pump_out(*p);
  return id;
}

Result<RequestId> ShmTransport::recv(int peer, void* data, std::size_t bytes) {
  HOOP_ASSIGN_OR_RETURN(Peer * p, check_peer(peer, data, bytes));
  auto [id, req] = add_request(peer, false, data, bytes);
  if (!p->closed.ok()) {
    // A peer that said goodbye may have left messages in the ring: deliver those first.
    p->in.recvs.push_back(&req);
    pump_in(*p);
    if (!req.done) {
      std::erase(p->in.recvs, &req);
      if (p->in.target == &req) p->in.target = nullptr;
      complete(req, p->closed);
    }
    return id;
  }
  p->in.recvs.push_back(&req);
  if (p->in.recvs.size() == 1 && !p->in.in_message) pump_in(*p, /*read_lent=*/false);
  return id;
}

void ShmTransport::wake() {
  wake_pending_.store(true);
  ring_doorbell(*own_header_, true);
}

void ShmTransport::abort(const Status& cause) {
  if (!aborted_.ok()) return;
  aborted_ = cause.ok() ? aborted("shm: aborted without a cause") : cause;
  requests_.for_each([this](RequestId, Request& req) {
    if (!req.done) complete(req, aborted_);
  });
  for (auto& p : peers_) {
    p->out.sends.clear();
    p->out.lent.clear();
    p->in.recvs.clear();
    p->in.target = nullptr;
    post_abort(*p->segment.header(), rank_, aborted_);
    ring_doorbell(*p->segment.header(), true);
  }
}

}  // namespace hoop::shm
