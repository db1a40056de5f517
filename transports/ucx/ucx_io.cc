// The UCX transport's progress: driving the worker, matching receives to the messages that
// arrived, reaping what UCX finished, control messages (abort, goodbye), peer liveness, and
// sleeping on the worker's event fd.
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <thread>

#include "core/log.h"
#include "transports/ucx/ucx_conn.h"

namespace hoop::ucx {
namespace {

// Where zero-byte messages point: UCX wants a buffer even for no bytes.
char g_empty = 0;

// How many rounds of ucp_worker_progress one progress() runs at most while UCX reports events,
// so that matching and reaping are not starved under a stream of traffic.
constexpr int kProgressRounds = 64;

std::uint64_t decode_u64(const std::string& bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8 && i < bytes.size(); ++i)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return v;
}

}  // namespace

bool UcxTransport::progress() {
  if (in_progress_) return false;
  in_progress_ = true;
  bool moved = false;
  for (int i = 0; i < kProgressRounds && ucp_worker_progress(ucp_->worker) != 0; ++i) moved = true;
  // Control first: a goodbye that arrived with the end of its sender's connection must be seen
  // before that end is taken for a crash.
  moved = read_control() || moved;
  for (auto& p : peers_) {
    if (!p->recvs.empty()) moved = match(*p) || moved;
  }
  moved = reap() || moved;
  for (auto& p : peers_) {
    if (p->ep_error != UCS_OK && p->closed.ok() && aborted_.ok()) {
      const Status cause = peer_lost(fmt::format(
          "ucx: rank {} (pid {}) is unreachable: UCX reports '{}' on its endpoint (the process "
          "died or the link dropped)",
          p->rank, p->pid, ucs_text(p->ep_error)));
      close_peer(*p, cause);
      abort(cause);
      moved = true;
    }
  }
  in_progress_ = false;
  return moved;
}

bool UcxTransport::match(Peer& p) {
  bool moved = false;
  while (!p.recvs.empty()) {
    Request& req = *p.recvs.front();
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg =
        ucp_tag_probe_nb(ucp_->worker, data_tag(p.rank, req.seq), kAllBits, 1, &info);
    if (msg == nullptr) {
      fail_unmatchable(p);
      break;
    }
    p.recvs.pop_front();
    moved = true;
    void* buffer = req.bytes == 0 ? &g_empty : req.data;
    if (info.length != req.bytes) {
      // The message is drained, so that the next one from this peer is matched as usual.
      req.status = protocol_error(fmt::format(
          "ucx: message {} from rank {} has {} bytes but the receive posted for it on rank {} "
          "takes {} bytes",
          req.seq, p.rank, info.length, rank_, req.bytes));
      req.discard.resize(std::max<std::size_t>(info.length, 1));
      buffer = req.discard.data();
    }
    ucp_request_param_t param{};
    void* r = ucp_tag_msg_recv_nbx(ucp_->worker, buffer, info.length, msg, &param);
    if (UCS_PTR_IS_ERR(r)) {
      complete(req, peer_lost(fmt::format("ucx: receiving {} bytes from rank {} failed: {}",
                                          info.length, p.rank, ucs_text(UCS_PTR_STATUS(r)))));
    } else if (r == nullptr) {
      complete(req);
    } else {
      req.ucp = r;
      in_flight_.push_back(&req);
    }
  }
  return moved;
}

bool UcxTransport::reap() {
  bool moved = false;
  for (std::size_t i = 0; i < in_flight_.size();) {
    Request& r = *in_flight_[i];
    const ucs_status_t st = ucp_request_check_status(r.ucp);
    if (st == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(r.ucp);
    r.ucp = nullptr;
    in_flight_[i] = in_flight_.back();
    in_flight_.pop_back();
    moved = true;
    if (st == UCS_OK) {
      complete(r);
      continue;
    }
    const Peer& p = *by_rank_[static_cast<std::size_t>(r.peer)];
    complete(r, !p.closed.ok()
                    ? p.closed
                    : peer_lost(fmt::format("ucx: {} failed: {}", describe(r), ucs_text(st))));
  }
  return moved;
}

bool UcxTransport::read_control() {
  bool moved = false;
  while (true) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = ucp_tag_probe_nb(ucp_->worker, kControlBit, kControlBit, 1, &info);
    if (msg == nullptr) break;
    moved = true;
    ControlMessage& m = control_in_.emplace_back();
    m.tag = info.sender_tag;
    m.payload.resize(info.length);
    void* buffer = info.length == 0 ? &g_empty : m.payload.data();
    ucp_request_param_t param{};
    void* r = ucp_tag_msg_recv_nbx(ucp_->worker, buffer, info.length, msg, &param);
    if (UCS_PTR_IS_ERR(r)) {
      HOOP_LOG(kDebug, "ucx: a control message from rank {} was lost: {}", tag_source(m.tag),
               ucs_text(UCS_PTR_STATUS(r)));
      control_in_.pop_back();
    } else if (r != nullptr) {
      m.ucp = r;
    }
  }
  // Delivered in arrival order: an abort behind a goodbye's stays behind it.
  while (!control_in_.empty()) {
    ControlMessage& m = control_in_.front();
    if (m.ucp != nullptr) {
      const ucs_status_t st = ucp_request_check_status(m.ucp);
      if (st == UCS_INPROGRESS) break;
      ucp_request_free(m.ucp);
      m.ucp = nullptr;
      if (st != UCS_OK) {
        control_in_.pop_front();
        continue;
      }
    }
    const ControlMessage done = std::move(m);
    control_in_.pop_front();
    on_control(tag_source(done.tag), static_cast<Control>(done.tag & 0xff), done.payload);
    moved = true;
  }
  return moved;
}

void UcxTransport::on_control(int source, Control kind, const std::string& payload) {
  Peer* p = source >= 0 && source < size_ ? by_rank_[static_cast<std::size_t>(source)] : nullptr;
  if (p == nullptr) {
    HOOP_LOG(kWarn, "ucx: rank {} ignores a control message claiming to be from rank {}", rank_,
             source);
    return;
  }
  if (kind == Control::kAbort) {
    if (!aborted_.ok() || payload.empty()) return;
    auto code = static_cast<StatusCode>(payload[0]);
    if (code == StatusCode::kOk || code > StatusCode::kInternal) code = StatusCode::kAborted;
    // Every rank of the mesh heard the cause from its origin directly, so it is not passed on.
    forward_abort_ = false;
    abort(Status(code, fmt::format("ucx: rank {} aborted: {}", source, payload.substr(1))));
  } else if (kind == Control::kGoodbye) {
    p->goodbye = decode_u64(payload);
    if (p->closed.ok()) {
      p->closed = peer_lost(fmt::format("ucx: rank {} shut its transport down", p->rank));
    }
    match(*p);
  } else if (kind == Control::kAlive) {
    p->answered = true;
  }
}

void UcxTransport::fail_unmatchable(Peer& p) {
  if (!p.goodbye) return;
  // Receives are matched in order, so once the front cannot come, nothing behind it can.
  if (p.recvs.empty() || p.recvs.front()->seq < *p.goodbye) return;
  for (Request* r : p.recvs) complete(*r, p.closed);
  p.recvs.clear();
}

void UcxTransport::check_peers() {
  const auto now = Clock::now();
  std::vector<pollfd> fds;
  std::vector<Peer*> watched;
  for (auto& p : peers_) {
    if (p->closed.ok() && p->pidfd.valid() && !p->exited_at) {
      fds.push_back({p->pidfd.get(), POLLIN, 0});
      watched.push_back(p.get());
    }
  }
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP)) != 0) watched[i]->exited_at = now;
    }
  }
  for (auto& p : peers_) {
    // The goodbye a peer sent before exiting may still be on its way: the exit counts as a
    // crash only when none came within the grace period.
    if (!p->closed.ok() || !p->exited_at || now - *p->exited_at < kExitGrace) continue;
    if (!aborted_.ok()) {
      p->closed = aborted_;
      continue;
    }
    const Status cause = peer_lost(fmt::format(
        "ucx: rank {} (pid {}) exited without shutting its transport down (the process died)",
        p->rank, p->pid));
    close_peer(*p, cause);
    abort(cause);
  }
}

void UcxTransport::close_peer(Peer& p, const Status& why) {
  if (p.closed.ok()) p.closed = why;
  for (Request* r : p.recvs) complete(*r, why);
  p.recvs.clear();
}

Status UcxTransport::name_silent_peers(const Status& cause) {
  // A peer that said goodbye, whose endpoint failed or whose process exited cannot answer, and
  // the cause (or its own error) already names it.
  auto silent = [](const Peer& p) {
    return !p.answered && p.ep != nullptr && p.ep_error == UCS_OK && p.closed.ok();
  };
  const Deadline deadline = Clock::now() + kAnswerGrace;
  while (std::any_of(peers_.begin(), peers_.end(), [&](const auto& p) { return silent(*p); })) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    check_peers_if_due(now);
    const bool moved = ucp_worker_progress(ucp_->worker) != 0;
    if (!read_control() && !moved) {
      sleep_on_fd(std::chrono::ceil<std::chrono::microseconds>(
          std::min<Clock::duration>(deadline - now, kPeerCheckInterval)));
    }
  }
  std::string names;
  for (const auto& p : peers_) {
    if (silent(*p))
      names += fmt::format("{}rank {} (pid {})", names.empty() ? "" : ", ", p->rank, p->pid);
  }
  if (names.empty()) return cause;
  return Status(cause.code(),
                fmt::format("{}; {} did not answer within {} ms (stopped, hung or not calling into "
                            "hoop)",
                            cause.message(), names, kAnswerGrace.count()));
}

void UcxTransport::send_control(Peer& p, Control kind, std::string payload) {
  if (p.ep == nullptr || p.ep_error != UCS_OK || !p.closed.ok()) return;
  ControlMessage& m = control_out_.emplace_back();
  m.payload = std::move(payload);
  m.tag = kControlBit | data_tag(rank_, static_cast<std::uint64_t>(kind));
  void* buffer = m.payload.empty() ? &g_empty : m.payload.data();
  ucp_request_param_t param{};
  void* r = ucp_tag_send_nbx(p.ep, buffer, m.payload.size(), m.tag, &param);
  if (UCS_PTR_IS_PTR(r)) m.ucp = r;
}

void UcxTransport::broadcast_control(Control kind, const std::string& payload) {
  for (auto& p : peers_) send_control(*p, kind, payload);
}

void UcxTransport::flush(Deadline deadline, std::vector<void*>& closing) {
  while (true) {
    ucp_worker_progress(ucp_->worker);
    while (!control_out_.empty()) {
      ControlMessage& m = control_out_.front();
      if (m.ucp != nullptr) {
        if (ucp_request_check_status(m.ucp) == UCS_INPROGRESS) break;
        ucp_request_free(m.ucp);
      }
      control_out_.pop_front();
    }
    std::erase_if(closing, [](void* r) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
      ucp_request_free(r);
      return true;
    });
    if (control_out_.empty() && closing.empty()) return;
    if (Clock::now() >= deadline) {
      HOOP_LOG(kDebug, "ucx: rank {}: {} control message(s) and {} endpoint close(s) unfinished",
               rank_, control_out_.size(), closing.size());
      return;
    }
    ::sched_yield();
  }
}

bool UcxTransport::sleep(Clock::duration max, bool /*stop_on_wake*/) {
  return sleep_on_fd(std::chrono::ceil<std::chrono::microseconds>(max)) && progress();
}

bool UcxTransport::sleep_on_fd(std::chrono::microseconds timeout) {
  if (ucp_->event_fd < 0) {
    std::this_thread::sleep_for(std::min(timeout, std::chrono::microseconds{200}));
    return true;
  }
  const ucs_status_t st = ucp_worker_arm(ucp_->worker);
  if (st == UCS_ERR_BUSY) return true;  // events are pending: progress right away
  if (st != UCS_OK) {
    std::this_thread::sleep_for(std::min(timeout, std::chrono::microseconds{200}));
    return true;
  }
  pollfd fd{ucp_->event_fd, POLLIN, 0};
  const auto us = std::max<std::int64_t>(timeout.count(), 0);
  const timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  return ::ppoll(&fd, 1, &ts, nullptr) > 0;
}

}  // namespace hoop::ucx
