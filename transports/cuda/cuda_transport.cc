// The CUDA IPC transport's requests: argument checks, posting, wait/test/poll, abort and
// shutdown.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "transports/cuda/cuda_conn.h"

namespace hoop::cuda {
namespace {

/// How long shutdown or an abort waits for this rank's own queued copies.
constexpr std::chrono::seconds kSettleTimeout{10};

}  // namespace

Status check_device_buffer(const void* data, std::size_t bytes, std::string_view operand) {
  if (bytes == 0) return Status::success();
  if (data == nullptr) return invalid_argument(fmt::format("cuda: the {} is null", operand));
  if (device::pointer_device(data) == kCpuDevice) {
    return invalid_argument(fmt::format(
        "cuda: the {} ({}) is host memory; the CUDA IPC transport moves device memory only",
        operand, data));
  }
  return Status::success();
}

CudaTransport::CudaTransport(int rank, int size, int device, const CudaOptions& options,
                             shm::Segment own, device::Buffer rings,
                             std::vector<std::unique_ptr<Peer>> peers)
    : rank_(rank),
      size_(size),
      device_(device),
      own_(std::move(own)),
      own_header_(own_.header()),
      rings_(std::move(rings)),
      peers_(std::move(peers)),
      by_rank_(static_cast<std::size_t>(size), nullptr) {
  for (auto& p : peers_) by_rank_[static_cast<std::size_t>(p->rank)] = p.get();
  spin_ = options.spin;
}

CudaTransport::~CudaTransport() {
  if (sends_pending() || must_poll()) {
    abort(aborted(
        fmt::format("rank {} shut its cuda transport down with sends or copies pending", rank_)));
  }
  // Every send is published (its copy complete) before it completes, so the goodbye only tells
  // the peers that the exit that follows is no crash; the own rings are freed after it, once
  // no peer writes to them any more.
  settle_copies();
  own_header_->goodbye.store(1, std::memory_order_release);
  for (auto& p : peers_) shm::ring_doorbell(*p->segment.header(), true);
}

Result<Peer*> CudaTransport::check_peer(int peer, const void* data, std::size_t bytes,
                                        bool is_send) {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return invalid_argument(fmt::format(
        "cuda: peer {} is not another rank of this job (rank {} of {})", peer, rank_, size_));
  }
  Peer* p = by_rank_[static_cast<std::size_t>(peer)];
  if (p == nullptr) {
    return invalid_argument(fmt::format(
        "cuda: rank {} is not a CUDA IPC peer of rank {} (not on this host or not in the mesh)",
        peer, rank_));
  }
  HOOP_RETURN_IF_ERROR(
      check_device_buffer(data, bytes, is_send ? "send buffer" : "receive buffer"));
  if (!aborted_.ok()) return aborted_;
  return p;
}

Result<RequestId> CudaTransport::send(int peer, const void* data, std::size_t bytes) {
  HOOP_ASSIGN_OR_RETURN(Peer * p, check_peer(peer, data, bytes, true));
  auto [id, req] = add_request(peer, true, data, bytes);
  if (!p->closed.ok()) {
    complete(req, p->closed);
    return id;
  }
  p->out.sends.push_back(&req);
  // The first slices start copying at once; wait() and test() publish them.
  if (device::set_device(device_).ok()) issue_out(*p);
  return id;
}

Result<RequestId> CudaTransport::recv(int peer, void* data, std::size_t bytes) {
  HOOP_ASSIGN_OR_RETURN(Peer * p, check_peer(peer, data, bytes, false));
  auto [id, req] = add_request(peer, false, data, bytes);
  p->in.recvs.push_back(&req);
  if (!p->closed.ok()) {
    // A peer that said goodbye may have left messages in its ring: deliver those first.
    drain_in(*p);
    if (!req.done) {
      std::erase(p->in.recvs, &req);
      std::erase(p->in.completes, &req);
      if (p->in.target == &req) p->in.target = nullptr;
      complete(req, p->closed);
    }
    return id;
  }
  if (device::set_device(device_).ok()) issue_in(*p);
  return id;
}

bool CudaTransport::must_poll() const {
  for (const auto& p : peers_) {
    if (p->closed.ok() && (p->out.finished < p->out.issued || p->in.finished < p->in.issued))
      return true;
  }
  return false;
}

void CudaTransport::settle_copies() {
  if (!device::set_device(device_).ok()) return;
  const Deadline deadline = Clock::now() + kSettleTimeout;
  for (auto& p : peers_) {
    (void)device::synchronize(p->out.stream.handle(), deadline);
    (void)device::synchronize(p->in.stream.handle(), deadline);
  }
}

void CudaTransport::wake() {
  wake_pending_.store(true);
  shm::ring_doorbell(*own_header_, true);
}

void CudaTransport::abort(const Status& cause) {
  if (!aborted_.ok()) return;
  aborted_ = cause.ok() ? aborted("cuda: aborted without a cause") : cause;
  // No queued copy may write a caller's buffer once its request has failed.
  settle_copies();
  requests_.for_each([this](RequestId, Request& req) {
    if (!req.done) complete(req, aborted_);
  });
  for (auto& p : peers_) {
    p->out.sends.clear();
    p->out.queued.clear();
    p->in.recvs.clear();
    p->in.completes.clear();
    p->in.target = nullptr;
    shm::post_abort(*p->segment.header(), rank_, aborted_);
    shm::ring_doorbell(*p->segment.header(), true);
  }
}

}  // namespace hoop::cuda
