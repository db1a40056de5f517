// The UCX transport's requests: posting, wait/test/poll, abort and shutdown.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "transports/ucx/ucx_conn.h"

namespace hoop::ucx {

UcxTransport::UcxTransport(int rank, int size, const UcxOptions& options, std::unique_ptr<Ucp> ucp,
                           std::vector<std::unique_ptr<Peer>> peers)
    : rank_(rank),
      size_(size),
      ucp_(std::move(ucp)),
      peers_(std::move(peers)),
      by_rank_(static_cast<std::size_t>(size), nullptr) {
  for (auto& p : peers_) by_rank_[static_cast<std::size_t>(p->rank)] = p.get();
  spin_ = options.spin;
}

UcxTransport::~UcxTransport() { shut_down(); }

void UcxTransport::shut_down() {
  if (sends_pending()) {
    abort(aborted(fmt::format("rank {} shut its ucx transport down with sends pending", rank_)));
  }
  // The goodbye tells each peer how many messages this rank sent, so that it can still match
  // them and knows the exit that follows is no crash. After an abort the peers have the cause.
  if (aborted_.ok()) {
    for (auto& p : peers_) {
      if (!p->closed.ok() || p->ep_error != UCS_OK) continue;
      std::string count(8, '\0');
      for (int i = 0; i < 8; ++i) count[i] = static_cast<char>((p->sent >> (8 * i)) & 0xff);
      send_control(*p, Control::kGoodbye, std::move(count));
    }
  }
  for (Request* r : in_flight_) {
    if (!r->is_send) ucp_request_cancel(ucp_->worker, r->ucp);
  }
  // Flush-closing the endpoints delivers what is still in flight (the goodbyes among it); an
  // endpoint that failed, or whose peer said goodbye (it reads nothing more), is closed by force.
  std::vector<void*> closing;
  for (auto& p : peers_) {
    ucp_request_param_t param{};
    if (p->ep_error != UCS_OK || p->goodbye) {
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    void* r = ucp_ep_close_nbx(p->ep, &param);
    if (UCS_PTR_IS_PTR(r)) closing.push_back(r);
    p->ep = nullptr;
  }
  flush(Clock::now() + kFlushTimeout, closing);
  for (void* r : closing) ucp_request_free(r);
  drain_unclaimed();
  for (Request* r : in_flight_) ucp_request_free(r->ucp);
  in_flight_.clear();
  for (ControlMessage& m : control_out_) {
    if (m.ucp != nullptr) ucp_request_free(m.ucp);
  }
  for (ControlMessage& m : control_in_) {
    if (m.ucp != nullptr) ucp_request_free(m.ucp);
  }
  control_out_.clear();
  control_in_.clear();
}

void UcxTransport::drain_unclaimed() {
  // Messages no receive will claim (the peers' goodbyes, data of an aborted job) are taken out
  // of UCX's unexpected queue, which otherwise warns about each one when the worker goes.
  std::vector<char> sink;
  ucp_tag_recv_info_t info{};
  while (ucp_tag_message_h msg = ucp_tag_probe_nb(ucp_->worker, 0, 0, 1, &info)) {
    sink.resize(std::max<std::size_t>(info.length, 1));
    ucp_request_param_t param{};
    void* r = ucp_tag_msg_recv_nbx(ucp_->worker, sink.data(), info.length, msg, &param);
    if (!UCS_PTR_IS_PTR(r)) continue;
    const Deadline deadline = Clock::now() + kPeerCheckInterval;
    while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline) {
      ucp_worker_progress(ucp_->worker);
    }
    if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(ucp_->worker, r);
    ucp_request_free(r);
    break;  // the sink may still be in use by a cancelled transfer: stop here
  }
}

Result<Peer*> UcxTransport::check_peer(int peer, const void* data, std::size_t bytes) {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return invalid_argument(fmt::format(
        "ucx: peer {} is not another rank of this job (rank {} of {})", peer, rank_, size_));
  }
  Peer* p = by_rank_[static_cast<std::size_t>(peer)];
  if (p == nullptr) {
    return invalid_argument(
        fmt::format("ucx: rank {} is not a ucx peer of rank {} (not in the mesh)", peer, rank_));
  }
  if (data == nullptr && bytes > 0) return invalid_argument("ucx: null buffer");
  if (!aborted_.ok()) return aborted_;
  return p;
}

void UcxTransport::release(Request& req) {
  if (req.ucp == nullptr) return;
  // A cancelled receive stops writing into the caller's buffer; a send UCX cannot cancel goes
  // on in the background and is released when it ends (or when its endpoint closes).
  if (!req.is_send) ucp_request_cancel(ucp_->worker, req.ucp);
  ucp_request_free(req.ucp);
  req.ucp = nullptr;
  std::erase(in_flight_, &req);
}

Result<RequestId> UcxTransport::send(int peer, const void* data, std::size_t bytes) {
  HOOP_ASSIGN_OR_RETURN(Peer * p, check_peer(peer, data, bytes));
  auto [id, req] = add_request(peer, true, data, bytes);
  req.seq = p->sent++;
  if (!p->closed.ok()) {
    complete(req, p->closed);
    return id;
  }
  static const char kEmpty = 0;
  ucp_request_param_t param{};
  void* r =
      ucp_tag_send_nbx(p->ep, bytes == 0 ? &kEmpty : data, bytes, data_tag(rank_, req.seq), &param);
  if (UCS_PTR_IS_ERR(r)) {
    complete(req, peer_lost(fmt::format("ucx: sending {} bytes to rank {} failed: {}", bytes, peer,
                                        ucs_text(UCS_PTR_STATUS(r)))));
  } else if (r == nullptr) {
    complete(req);  // sent in place (eager): the buffer may be reused
  } else {
    req.ucp = r;
    in_flight_.push_back(&req);
  }
  return id;
}

Result<RequestId> UcxTransport::recv(int peer, void* data, std::size_t bytes) {
  HOOP_ASSIGN_OR_RETURN(Peer * p, check_peer(peer, data, bytes));
  auto [id, req] = add_request(peer, false, data, bytes);
  req.seq = p->posted++;
  if (!p->closed.ok() && !p->goodbye) {
    complete(req, p->closed);
    return id;
  }
  p->recvs.push_back(&req);
  // A message already there is matched at once; after a goodbye, one that cannot come fails.
  match(*p);
  return id;
}

Status UcxTransport::timeout_status(const Status& /*timeout*/) { return aborted_; }

void UcxTransport::wake() {
  wake_pending_.store(true);
  ucp_worker_signal(ucp_->worker);
}

void UcxTransport::abort(const Status& cause) {
  if (!aborted_.ok()) return;
  aborted_ = cause.ok() ? aborted("ucx: aborted without a cause") : cause;
  if (forward_abort_) {
    const std::string text = aborted_.message().substr(0, kMaxAbortText);
    broadcast_control(Control::kAbort, std::string(1, static_cast<char>(aborted_.code())) + text);
  }
  // Every rank that aborts says so. A timeout names the peers a rank waited for, which may be
  // live ranks waiting in turn for a stopped one; the peers that never say so are the culprits,
  // and every rank that aborts on a timeout (its own or a peer's) names them.
  broadcast_control(Control::kAlive, "");
  if (aborted_.code() == StatusCode::kTimeout) aborted_ = name_silent_peers(aborted_);
  requests_.for_each([this](RequestId, Request& req) {
    if (req.done) return;
    complete(req, aborted_);
    release(req);
  });
  for (auto& p : peers_) p->recvs.clear();
  // The cause and the answer must leave before this rank goes on to exit, as it usually does.
  std::vector<void*> none;
  flush(Clock::now() + kFlushTimeout, none);
}

}  // namespace hoop::ucx
