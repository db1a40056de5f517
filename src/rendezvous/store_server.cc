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
#include <atomic>
#include <cerrno>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/crypto.h"
#include "core/log.h"
#include "core/socket.h"
#include "hoop/rendezvous.h"
#include "rendezvous/store_protocol.h"

namespace hoop {
namespace {

using rendezvous::Opcode;
using Clock = net::Clock;
using Deadline = net::Deadline;

constexpr std::uint64_t kListenerTag = 0;
constexpr std::uint64_t kWakeTag = 1;
constexpr std::uint64_t kFirstConnectionId = 2;
constexpr int kMaxEvents = 128;
// Most bytes read from one connection per readiness event, so a client streaming a large
// value shares the loop with everyone else.
constexpr std::size_t kReadBudget = std::size_t{1} << 20;
// Reads are this small unless a large frame is known to be arriving: most requests are
// tiny, and each connection's buffer should stay so.
constexpr std::size_t kSmallRead = 4096;
// A client whose unread answers exceed this is not read from until it catches up.
constexpr std::size_t kMaxQueuedBytes = std::size_t{8} << 20;
// After the process runs out of descriptors, accepting pauses this long.
constexpr std::chrono::milliseconds kAcceptPause{100};

// Lets the tables be searched with a string_view straight off the wire, without a copy.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct Connection {
  std::uint64_t id = 0;
  Fd fd;
  std::string peer;      // "1.2.3.4:5678", plus " (rank N)" once the hello says so
  bool ready = false;    // handshake done
  bool closing = false;  // closed at the next safe point
  std::string server_nonce;
  net::ReadBuffer in;
  net::WriteQueue out;
  std::uint32_t events = 0;  // epoll interest now registered
  bool has_timer = false;
  Deadline timer{};
  bool waiting = false;  // a wait is parked; later requests stay buffered until it ends
  std::vector<std::string> wait_keys;
};

class StoreServerImpl final : public StoreServer {
 public:
  StoreServerImpl(StoreOptions options, std::string address, net::Listener listener, Fd epoll,
                  Fd wake)
      : options_(std::move(options)),
        address_(std::move(address)),
        listener_(std::move(listener)),
        epoll_(std::move(epoll)),
        wake_(std::move(wake)) {}
  ~StoreServerImpl() override { stop(); }

  Status launch() {
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
      return internal_error(fmt::format("could not start the store thread: {}", e.what()));
    }
    return Status::success();
  }

  std::uint16_t port() const override { return listener_.port; }

  StoreServerStats stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }

  void stop() override {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (!thread_.joinable()) return;
    stop_requested_.store(true);
    const std::uint64_t one = 1;
    if (::write(wake_.get(), &one, sizeof one) != sizeof one) {
      HOOP_LOG(kError, "store {}: could not wake the event loop to stop it (errno {})", address_,
               errno);
    }
    thread_.join();
  }

 private:
  void run();
  void accept_all();
  void on_event(Connection& c, std::uint32_t events);
  void read_some(Connection& c);
  void process_frames(Connection& c);
  void handle_hello(Connection& c, std::uint8_t op, std::string_view payload);
  void handle_request(Connection& c, std::uint8_t op, std::string_view payload);
  void handle_add(Connection& c, const rendezvous::Request& req);
  void handle_wait(Connection& c, const rendezvous::Request& req);
  template <typename Keys>
  bool all_set(const Keys& keys) const;
  void notify_waiters(std::string_view key);
  void finish_wait(Connection& c, bool timed_out);
  void unwatch(Connection& c);
  void fire_timers();
  void send(Connection& c, std::string frame);
  void flush(Connection& c);
  void update_interest(Connection& c);
  void set_timer(Connection& c, Deadline deadline);
  void clear_timer(Connection& c);
  void refuse(Connection& c, const Status& reason, bool auth);
  void drop(Connection& c, std::string_view why);
  void reap();
  int epoll_timeout_ms() const;
  Connection* find(std::uint64_t id);
  void count(std::uint64_t StoreServerStats::*field);

  const StoreOptions options_;
  const std::string address_;
  net::Listener listener_;
  Fd epoll_;
  Fd wake_;
  std::thread thread_;
  std::mutex stop_mu_;
  std::atomic<bool> stop_requested_{false};
  mutable std::mutex stats_mu_;
  StoreServerStats stats_;

  // Everything below belongs to the event-loop thread.
  StringMap<std::string> data_;
  StringMap<std::unordered_set<std::uint64_t>> waiters_by_key_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Connection>> conns_;
  std::uint64_t next_id_ = kFirstConnectionId;
  std::set<std::pair<Deadline, std::uint64_t>> timers_;
  std::vector<std::uint64_t> to_close_;
  std::vector<std::uint64_t> to_resume_;  // connections with buffered requests to go on with
  bool accept_paused_ = false;
  Deadline accept_resume_{};
};

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
                  protocol_error(fmt::format("expected a client hello, got a {} frame",
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

void StoreServerImpl::handle_request(Connection& c, std::uint8_t op, std::string_view payload) {
  namespace rv = rendezvous;
  auto decoded = rv::decode_request(op, payload);
  if (!decoded.ok()) {
    if (decoded.status().code() == StatusCode::kProtocolError) {
      return refuse(c, decoded.status(), /*auth=*/false);
    }
    return send(c, rv::encode_error(decoded.status()));
  }
  const rv::Request& req = *decoded;
  switch (req.op) {
    case Opcode::kSet:
      if (req.key.size() + req.value.size() > options_.max_value_bytes) {
        return send(c, rv::encode_error(invalid_argument(fmt::format(
                           "key {} and its value take {} bytes; the store's limit is {}",
                           rv::quote_key(req.key), req.key.size() + req.value.size(),
                           options_.max_value_bytes))));
      }
      data_.insert_or_assign(std::string(req.key), std::string(req.value));
      send(c, rv::encode_ok());
      return notify_waiters(req.key);
    case Opcode::kGet: {
      auto it = data_.find(req.key);
      if (it != data_.end()) return send(c, rv::encode_ok(it->second));
      return send(c, rv::encode_error(not_found(
                         fmt::format("store key {} is not set", rv::quote_key(req.key)))));
    }
    case Opcode::kDelete: {
      auto it = data_.find(req.key);
      const bool existed = it != data_.end();
      if (existed) data_.erase(it);
      return send(c,
                  rv::encode_ok(existed ? std::string_view("\1", 1) : std::string_view("\0", 1)));
    }
    case Opcode::kAdd:
      return handle_add(c, req);
    case Opcode::kWait:
      return handle_wait(c, req);
    default:
      return refuse(c, internal_error("decode_request let an unknown opcode through"), false);
  }
}

void StoreServerImpl::handle_add(Connection& c, const rendezvous::Request& req) {
  auto it = data_.find(req.key);
  auto sum =
      rendezvous::add_to_counter(req.key, it == data_.end() ? nullptr : &it->second, req.delta);
  if (!sum.ok()) return send(c, rendezvous::encode_error(sum.status()));
  if (it != data_.end()) {
    it->second = std::to_string(*sum);
  } else {
    data_.emplace(std::string(req.key), std::to_string(*sum));
  }
  send(c, rendezvous::encode_ok_i64(*sum));
  notify_waiters(req.key);
}

template <typename Keys>
bool StoreServerImpl::all_set(const Keys& keys) const {
  return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data_.contains(k); });
}

void StoreServerImpl::handle_wait(Connection& c, const rendezvous::Request& req) {
  if (all_set(req.keys)) return send(c, rendezvous::encode_ok());
  c.wait_keys.assign(req.keys.begin(), req.keys.end());
  c.waiting = true;
  // Every key is watched, not just the missing ones: one may be deleted before the others
  // arrive, and its return must still be noticed.
  for (const std::string& key : c.wait_keys) waiters_by_key_[key].insert(c.id);
  const std::uint64_t capped_ms = std::min<std::uint64_t>(req.timeout_ms, INT64_MAX / 2);
  set_timer(c,
            net::deadline_after(std::chrono::milliseconds(static_cast<std::int64_t>(capped_ms))));
  if (req.timeout_ms == 0) finish_wait(c, /*timed_out=*/true);
}

void StoreServerImpl::notify_waiters(std::string_view key) {
  auto it = waiters_by_key_.find(key);
  if (it == waiters_by_key_.end()) return;
  // finish_wait edits the index, so work from a copy.
  const std::vector<std::uint64_t> ids(it->second.begin(), it->second.end());
  for (const std::uint64_t id : ids) {
    Connection* c = find(id);
    if (c != nullptr && c->waiting && all_set(c->wait_keys)) finish_wait(*c, /*timed_out=*/false);
  }
}

void StoreServerImpl::finish_wait(Connection& c, bool timed_out) {
  unwatch(c);
  clear_timer(c);
  c.waiting = false;
  if (timed_out) {
    std::vector<std::string_view> missing;
    for (const std::string& key : c.wait_keys) {
      if (!data_.contains(key)) missing.push_back(key);
    }
    send(c, rendezvous::encode_wait_timeout(missing));
  } else {
    send(c, rendezvous::encode_ok());
  }
  c.wait_keys.clear();
  to_resume_.push_back(c.id);
}

void StoreServerImpl::unwatch(Connection& c) {
  for (const std::string& key : c.wait_keys) {
    auto it = waiters_by_key_.find(key);
    if (it == waiters_by_key_.end()) continue;
    it->second.erase(c.id);
    if (it->second.empty()) waiters_by_key_.erase(it);
  }
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
    conns_.erase(it);  // closing the fd also takes it out of epoll
  }
  to_close_.clear();
}

}  // namespace

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
