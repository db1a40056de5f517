// The store server: one event-loop thread multiplexes every connection with epoll over
// non-blocking sockets. Each connection owns a read buffer and a write queue, so a client
// that is idle, sends half a frame, never reads its answers or sends garbage only ever
// costs its own connection; parked waits and handshakes carry deadlines kept in one
// ordered timer set, whose earliest entry bounds epoll_wait.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "core/crypto.h"
#include "rendezvous/store_server_impl.h"

namespace hoop::rendezvous {

void StoreServerImpl::count(std::uint64_t StoreServerStats::*field) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++(stats_.*field);
}

Connection* StoreServerImpl::find(std::uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end() || it->second->closing) return nullptr;
  return it->second.get();
}

int StoreServerImpl::epoll_timeout_ms() const {
  Deadline next = Deadline::max();
  if (!timers_.empty()) next = timers_.begin()->first;
  if (accept_paused_) next = std::min(next, accept_resume_);
  if (next == Deadline::max()) return -1;
  return static_cast<int>(std::min<std::int64_t>(net::remaining(next).count(), 1 << 30));
}

void StoreServerImpl::run() {
  epoll_event events[kMaxEvents];
  while (!stop_requested_.load()) {
    const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, epoll_timeout_ms());
    if (n < 0) {
      if (errno == EINTR) continue;
      HOOP_LOG(kError, "store {}: epoll_wait failed (errno {}); closing every connection", address_,
               errno);
      break;
    }
    for (int i = 0; i < n; ++i) {
      const std::uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) {
        std::uint64_t drained = 0;
        // The counter only matters as a wake-up; stop_requested_ says why.
        if (::read(wake_.get(), &drained, sizeof drained) < 0 && errno != EAGAIN) {
          HOOP_LOG(kWarn, "store {}: reading the wake-up fd failed (errno {})", address_, errno);
        }
      } else if (tag == kListenerTag) {
        accept_all();
      } else if (Connection* c = find(tag)) {
        on_event(*c, events[i].events);
      }
      reap();
    }
    fire_timers();
    reap();
    while (!to_resume_.empty()) {
      std::vector<std::uint64_t> ids;
      ids.swap(to_resume_);
      for (const std::uint64_t id : ids) {
        if (Connection* c = find(id)) process_frames(*c);
      }
      reap();
    }
  }
  // Closing the sockets is what tells clients (and parked waiters) that the store is gone.
  conns_.clear();
  waiters_by_key_.clear();
  timers_.clear();
  listener_.fd.reset();
  crypto::release_thread_state();
}

void StoreServerImpl::accept_all() {
  if (accept_paused_) return;
  while (true) {
    const int fd = ::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The pending connection stays queued and the listener stays readable, so keep it
        // out of epoll for a moment instead of spinning on it.
        HOOP_LOG(kWarn, "store {}: cannot accept connections ({}); pausing for {} ms", address_,
                 errno_error("accept", errno).message(), kAcceptPause.count());
        epoll_event ev{};
        if (::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listener_.fd.get(), &ev) != 0) {
          HOOP_LOG(kError, "store {}: epoll_ctl(DEL listener) failed (errno {})", address_, errno);
        }
        accept_paused_ = true;
        accept_resume_ = Clock::now() + kAcceptPause;
        return;
      }
      HOOP_LOG(kError, "store {}: {}", address_, errno_error("accept", errno).message());
      return;
    }
    auto conn = std::make_unique<Connection>();
    Connection& c = *conn;
    c.id = next_id_++;
    c.fd.reset(fd);
    c.peer = net::peer_address(fd);
    const Status nodelay = net::set_nodelay(fd);
    if (!nodelay.ok()) HOOP_LOG(kDebug, "store: {} for {}", nodelay.message(), c.peer);
    auto nonce = crypto::random_bytes(rendezvous::kNonceBytes);
    if (!nonce.ok()) {
      HOOP_LOG(kError, "store {}: dropping {}: {}", address_, c.peer, nonce.status().message());
      continue;
    }
    c.server_nonce = std::move(nonce).value();
    epoll_event ev{};
    ev.events = c.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = c.id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      HOOP_LOG(kError, "store {}: dropping {}: {}", address_, c.peer,
               errno_error("epoll_ctl(ADD)", errno).message());
      continue;
    }
    conns_.emplace(c.id, std::move(conn));
    HOOP_LOG(kDebug, "store {}: connection from {}", address_, c.peer);
    set_timer(c, net::deadline_after(options_.handshake_timeout));
    send(c, rendezvous::encode_server_hello({rendezvous::kProtocolVersion, c.server_nonce}));
  }
}

void StoreServerImpl::on_event(Connection& c, std::uint32_t events) {
  if (events & EPOLLERR) return drop(c, "connection error");
  if (events & EPOLLOUT) flush(c);
  if (c.closing) return;
  if (events & EPOLLIN) {
    read_some(c);
  } else if (events & (EPOLLRDHUP | EPOLLHUP)) {
    // Not reading (a wait is parked or answers are piling up), so nobody would notice the
    // peer left until the wait ends; forget it now.
    drop(c, "peer closed the connection");
  }
}

void StoreServerImpl::read_some(Connection& c) {
  std::size_t budget = kReadBudget;
  while (budget > 0 && !c.closing && !c.waiting && c.out.pending() < kMaxQueuedBytes) {
    std::size_t want = kSmallRead;
    if (c.in.size() >= rendezvous::kFrameHeaderBytes) {
      // The rest of a large frame in one go (its length passed the cap in process_frames;
      // the budget bounds the read either way).
      const auto header = rendezvous::decode_header(c.in.view().data());
      const std::size_t frame = rendezvous::kFrameHeaderBytes + header.length;
      if (frame > c.in.size()) want = std::max(want, frame - c.in.size());
    }
    want = std::min(want, budget);
    auto got = c.in.receive(c.fd.get(), want, c.peer);
    if (!got.ok()) {
      return drop(c, c.in.size() > 0 ? got.status().message() + " in the middle of a frame"
                                     : got.status().message());
    }
    if (*got == 0) return;
    budget -= *got;
    process_frames(c);
    if (*got < want) return;  // drained the socket for now
  }
}

void StoreServerImpl::process_frames(Connection& c) {
  while (!c.closing && !c.waiting && c.out.pending() < kMaxQueuedBytes &&
         c.in.size() >= rendezvous::kFrameHeaderBytes) {
    const std::size_t cap = c.ready ? rendezvous::max_frame_payload(options_.max_value_bytes)
                                    : rendezvous::kMaxHandshakePayload;
    const auto header = rendezvous::decode_header(c.in.view().data());
    if (header.length > cap) {
      return refuse(
          c,
          protocol_error(fmt::format("{} frame of {} bytes exceeds the limit of {} bytes",
                                     rendezvous::opcode_name(header.op), header.length, cap)),
          /*auth=*/false);
    }
    if (c.in.size() - rendezvous::kFrameHeaderBytes < header.length) break;
    const std::string_view payload =
        c.in.view().substr(rendezvous::kFrameHeaderBytes, header.length);
    if (c.ready) {
      handle_request(c, header.op, payload);
    } else {
      handle_hello(c, header.op, payload);
    }
    c.in.consume(rendezvous::kFrameHeaderBytes + header.length);
  }
  update_interest(c);
}

void StoreServerImpl::handle_hello(Connection& c, std::uint8_t op, std::string_view payload) {
  if (op != static_cast<std::uint8_t>(Opcode::kClientHello)) {
    return refuse(c,
                  protocol_error(fmt::format("expected a client hello frame, got one of type '{}'",
                                             rendezvous::opcode_name(op))),
                  /*auth=*/false);
  }
  auto verdict =
      rendezvous::verify_client_hello(payload, c.server_nonce, options_.secret, options_.job_id);
  if (verdict.rank >= 0) c.peer += fmt::format(" (rank {})", verdict.rank);
  if (!verdict.refusal.ok()) {
    return refuse(c, verdict.refusal, verdict.refusal.code() == StatusCode::kAuthFailed);
  }
  c.ready = true;
  clear_timer(c);
  count(&StoreServerStats::accepted);
  HOOP_LOG(kDebug, "store {}: accepted {}", address_, c.peer);
  send(c, std::move(verdict.answer));
}

void StoreServerImpl::fire_timers() {
  const Deadline now = Clock::now();
  if (accept_paused_ && now >= accept_resume_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerTag;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.fd.get(), &ev) == 0) {
      accept_paused_ = false;
    } else {
      HOOP_LOG(kError, "store {}: could not resume accepting (errno {})", address_, errno);
      accept_resume_ = now + kAcceptPause;
    }
  }
  while (!timers_.empty() && timers_.begin()->first <= now) {
    Connection* c = find(timers_.begin()->second);
    if (c == nullptr) {
      timers_.erase(timers_.begin());
    } else if (c->waiting) {
      finish_wait(*c, /*timed_out=*/true);
    } else {
      clear_timer(*c);
      if (!c->ready) {
        refuse(*c,
               protocol_error(fmt::format("no complete handshake within {} ms",
                                          options_.handshake_timeout.count())),
               /*auth=*/false);
      }
    }
  }
}

void StoreServerImpl::send(Connection& c, std::string frame) {
  if (c.closing) return;
  c.out.push(std::move(frame));
  flush(c);
}

void StoreServerImpl::flush(Connection& c) {
  if (c.closing) return;
  const bool was_full = c.out.pending() >= kMaxQueuedBytes;
  const Status sent = c.out.flush(c.fd.get(), c.peer);
  if (!sent.ok()) return drop(c, sent.message());
  if (was_full && c.out.pending() < kMaxQueuedBytes) to_resume_.push_back(c.id);
  update_interest(c);
}

void StoreServerImpl::update_interest(Connection& c) {
  if (c.closing) return;
  std::uint32_t want = EPOLLRDHUP;
  if (!c.waiting && c.out.pending() < kMaxQueuedBytes) want |= EPOLLIN;
  if (!c.out.empty()) want |= EPOLLOUT;
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) != 0) {
    return drop(c, errno_error("epoll_ctl(MOD)", errno).message());
  }
  c.events = want;
}

void StoreServerImpl::set_timer(Connection& c, Deadline deadline) {
  clear_timer(c);
  c.has_timer = true;
  c.timer = deadline;
  timers_.emplace(deadline, c.id);
}

void StoreServerImpl::clear_timer(Connection& c) {
  if (!c.has_timer) return;
  timers_.erase({c.timer, c.id});
  c.has_timer = false;
}

void StoreServerImpl::refuse(Connection& c, const Status& reason, bool auth) {
  if (c.closing) return;
  HOOP_LOG(kWarn, "store {}: {} connection from {}: {}", address_, auth ? "refused" : "dropped",
           c.peer, reason.message());
  count(auth ? &StoreServerStats::auth_failures : &StoreServerStats::protocol_errors);
  // One best-effort attempt to tell the peer why: an answer this small fits the socket
  // buffer of any peer that reads at all, and one that does not must not hold us up.
  c.out.push(rendezvous::encode_error(reason));
  if (!c.out.flush(c.fd.get(), c.peer).ok()) return drop(c, "");
  // Unread input makes close() send a reset, which can destroy the answer in flight; read
  // away what has arrived so the peer gets an orderly end after the answer.
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(c.fd.get(), sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  ::shutdown(c.fd.get(), SHUT_WR);
  drop(c, "");
}

void StoreServerImpl::drop(Connection& c, std::string_view why) {
  if (c.closing) return;
  if (!why.empty()) HOOP_LOG(kDebug, "store {}: closing {}: {}", address_, c.peer, why);
  c.closing = true;
  to_close_.push_back(c.id);
}

void StoreServerImpl::reap() {
  for (const std::uint64_t id : to_close_) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    unwatch(*it->second);
    clear_timer(*it->second);
    if (it->second->ready) count(&StoreServerStats::closed);
    conns_.erase(it);  // closing the fd also takes it out of epoll
  }
  to_close_.clear();
}

}  // namespace hoop::rendezvous

namespace hoop {

using rendezvous::kListenerTag;
using rendezvous::kWakeTag;
using rendezvous::StoreServerImpl;

Result<std::unique_ptr<StoreServer>> StoreServer::start(const std::string& bind_host,
                                                        std::uint16_t port, StoreOptions options) {
  if (options.secret.empty()) {
    return invalid_argument("store server: the job secret must not be empty (HOOP_SECRET)");
  }
  if (options.job_id.size() > rendezvous::kMaxJobIdBytes) {
    return invalid_argument(fmt::format("store server: job id of {} bytes; the limit is {}",
                                        options.job_id.size(), rendezvous::kMaxJobIdBytes));
  }
  if (options.max_value_bytes == 0) {
    return invalid_argument("store server: max_value_bytes must be positive");
  }
  if (options.handshake_timeout.count() <= 0) {
    return invalid_argument("store server: handshake_timeout must be positive");
  }
  HOOP_ASSIGN_OR_RETURN(net::Listener listener, net::listen_tcp(bind_host, port));
  Fd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return errno_error("store server: epoll_create1", errno);
  Fd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return errno_error("store server: eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerTag;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, listener.fd.get(), &ev) != 0) {
    return errno_error("store server: epoll_ctl(ADD listener)", errno);
  }
  ev.data.u64 = kWakeTag;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0) {
    return errno_error("store server: epoll_ctl(ADD eventfd)", errno);
  }
  std::string address = net::format_host_port(bind_host.empty() ? "*" : bind_host, listener.port);
  auto server = std::make_unique<StoreServerImpl>(std::move(options), address, std::move(listener),
                                                  std::move(epoll), std::move(wake));
  HOOP_RETURN_IF_ERROR(server->launch());
  HOOP_LOG(kInfo, "store listening on {}", address);
  return std::unique_ptr<StoreServer>(std::move(server));
}

}  // namespace hoop
