// The store server's state and event loop, shared by store_server.cc (connections, the
// handshake, timers) and store_requests.cc (the key-value requests and parked waits).
#pragma once

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/fd.h"
#include "core/log.h"
#include "core/socket.h"
#include "hoop/rendezvous.h"
#include "rendezvous/store_protocol.h"

namespace hoop::rendezvous {

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

}  // namespace hoop::rendezvous
