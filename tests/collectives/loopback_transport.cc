#include "tests/collectives/loopback_transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "collectives/algorithms/comm_impl.h"

namespace hoop::testing {

class LoopbackFabric {
 public:
  LoopbackFabric(int size, std::uint64_t seed)
      : size_(size),
        channels_(static_cast<std::size_t>(size) * static_cast<std::size_t>(size)),
        ticks_(static_cast<std::size_t>(size)),
        closed_(static_cast<std::size_t>(size)),
        shuffle_(seed != 0),
        rng_(seed) {}

  struct Message {
    std::vector<std::byte> bytes;
    std::uint64_t ready_tick = 0;  // visible once the receiver's tick reaches it
  };

  int size() const { return size_; }
  std::deque<Message>& channel(int from, int to) {
    return channels_[static_cast<std::size_t>(from) * static_cast<std::size_t>(size_) +
                     static_cast<std::size_t>(to)];
  }

  std::mutex mu;
  std::condition_variable cv;

  // All below under mu.
  std::uint64_t delay_for(int receiver) {
    const std::uint64_t now = ticks_[static_cast<std::size_t>(receiver)];
    return shuffle_ ? now + std::uniform_int_distribution<std::uint64_t>(0, 3)(rng_) : 0;
  }
  std::uint64_t& tick(int rank) { return ticks_[static_cast<std::size_t>(rank)]; }
  bool closed(int rank) const { return closed_[static_cast<std::size_t>(rank)] != 0; }
  void close(int rank) { closed_[static_cast<std::size_t>(rank)] = 1; }
  /// The first abort of any rank, as the other ranks see it.
  const std::optional<Status>& job_abort() const { return job_abort_; }
  void set_job_abort(Status s) {
    if (!job_abort_) job_abort_ = std::move(s);
  }

 private:
  int size_;
  std::vector<std::deque<Message>> channels_;  // [from * size + to]
  std::vector<std::uint64_t> ticks_;
  std::vector<char> closed_;
  bool shuffle_;
  std::mt19937_64 rng_;
  std::optional<Status> job_abort_;
};

namespace {

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank)
      : fabric_(std::move(fabric)), rank_(rank) {}

  ~LoopbackTransport() override {
    std::lock_guard lock(fabric_->mu);
    fabric_->close(rank_);
    fabric_->cv.notify_all();
  }

  std::string_view name() const override { return "loopback"; }
  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  bool accepts_device_memory() const override { return false; }

  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override {
    HOOP_RETURN_IF_ERROR(check(peer, data, bytes, "send"));
    std::lock_guard lock(fabric_->mu);
    // After an abort, here or anywhere in the job, requests fail as they are posted.
    if (Status f = failure_locked(); !f.ok()) return f;
    Request r{false, peer, nullptr, bytes, true, Status::success()};
    if (fabric_->closed(peer))
      r.status = peer_lost(fmt::format("loopback: rank {} shut its transport down", peer));
    if (r.status.ok()) {
      LoopbackFabric::Message m;
      m.bytes.resize(bytes);
      if (bytes > 0) std::memcpy(m.bytes.data(), data, bytes);
      m.ready_tick = fabric_->delay_for(peer);
      fabric_->channel(rank_, peer).push_back(std::move(m));
      fabric_->cv.notify_all();
    }
    return add(std::move(r));
  }

  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override {
    HOOP_RETURN_IF_ERROR(check(peer, data, bytes, "recv"));
    std::lock_guard lock(fabric_->mu);
    if (Status f = failure_locked(); !f.ok()) return f;
    const RequestId id = add(Request{true, peer, data, bytes, false, Status::success()});
    pending_[peer].push_back(id);
    return id;
  }

  Status wait(std::span<const RequestId> ids, Deadline deadline) override {
    // Under the fabric's lock throughout: abort() may come from another thread.
    std::unique_lock lock(fabric_->mu);
    for (RequestId id : ids)
      if (!requests_.contains(id)) return unknown(id);
    for (;;) {
      const bool moved = progress_locked();
      if (std::all_of(ids.begin(), ids.end(), [&](RequestId id) { return requests_[id].done; }))
        break;
      if (Clock::now() >= deadline) {
        const Request* late = nullptr;
        for (RequestId id : ids)
          if (!requests_[id].done) late = &requests_[id];
        const Status cause = timeout_error(fmt::format(
            "loopback: rank {} timed out waiting for the {} of {} bytes {} rank {}", rank_,
            late->is_recv ? "receive" : "send", late->bytes, late->is_recv ? "from" : "to",
            late->peer));
        abort_locked(cause);
        break;
      }
      // Messages not yet visible become so with this rank's next passes: no sleeping then.
      if (moved || unready_for_me()) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
        continue;
      }
      fabric_->cv.wait_until(lock, std::min(deadline, Clock::now() + kNap));
    }
    Status first;
    for (RequestId id : ids) {
      const auto it = requests_.find(id);
      if (it == requests_.end()) continue;  // listed twice
      if (first.ok() && !it->second.status.ok()) first = it->second.status;
      requests_.erase(it);
    }
    return first;
  }

  Result<bool> test(RequestId id) override {
    std::lock_guard lock(fabric_->mu);
    if (!requests_.contains(id)) return unknown(id);
    progress_locked();
    const auto it = requests_.find(id);
    if (!it->second.done) return false;
    const Status s = it->second.status;
    requests_.erase(it);
    if (!s.ok()) return s;
    return true;
  }

  void poll(std::chrono::microseconds timeout) override {
    std::unique_lock lock(fabric_->mu);
    if (progress_locked() || woken_ || unready_for_me()) {
      woken_ = false;
      return;
    }
    fabric_->cv.wait_for(lock, timeout);
    woken_ = false;
    progress_locked();
  }

  void wake() override {
    std::lock_guard lock(fabric_->mu);
    woken_ = true;
    fabric_->cv.notify_all();
  }

  void abort(const Status& cause) override {
    std::lock_guard lock(fabric_->mu);
    abort_locked(cause);
  }

 private:
  static constexpr auto kNap = std::chrono::milliseconds(2);

  struct Request {
    bool is_recv = false;
    int peer = 0;
    void* data = nullptr;
    std::size_t bytes = 0;
    bool done = false;
    Status status;
  };

  Status check(int peer, const void* data, std::size_t bytes, const char* what) const {
    if (peer < 0 || peer >= size() || peer == rank_)
      return invalid_argument(fmt::format("loopback: {} to rank {} of a job of {} ranks (this is "
                                          "rank {})",
                                          what, peer, size(), rank_));
    if (data == nullptr && bytes > 0)
      return invalid_argument(fmt::format("loopback: {} of {} bytes from a null buffer", what,
                                          bytes));
    return Status::success();
  }

  Status unknown(RequestId id) const {
    return invalid_argument(fmt::format("loopback: request {} is unknown or already consumed", id));
  }

  RequestId add(Request r) {
    const RequestId id = next_++;
    requests_.emplace(id, std::move(r));
    return id;
  }

  /// What a new request fails with: this rank's own abort, else another rank's.
  Status failure_locked() const {
    if (aborted_) return *aborted_;
    if (fabric_->job_abort()) return *fabric_->job_abort();
    return Status::success();
  }

  void abort_locked(const Status& cause) {
    if (aborted_) return;
    aborted_ = cause;
    fabric_->set_job_abort(
        Status(cause.code(), fmt::format("rank {} aborted: {}", rank_, cause.message())));
    fail_pending(cause);
    fabric_->cv.notify_all();
  }

  void fail_pending(const Status& cause) {
    for (auto& [peer, ids] : pending_) {
      for (RequestId id : ids) {
        requests_[id].done = true;
        requests_[id].status = cause;
      }
      ids.clear();
    }
  }

  bool unready_for_me() {
    const std::uint64_t now = fabric_->tick(rank_);
    for (const auto& [peer, ids] : pending_) {
      if (ids.empty()) continue;
      const auto& ch = fabric_->channel(peer, rank_);
      if (!ch.empty() && ch.front().ready_tick > now) return true;
    }
    return false;
  }

  /// Matches pending receives with visible messages; true if any request completed.
  bool progress_locked() {
    const std::uint64_t now = ++fabric_->tick(rank_);
    bool moved = false;
    if (!aborted_ && fabric_->job_abort()) {
      fail_pending(*fabric_->job_abort());
      return true;
    }
    for (auto& [peer, ids] : pending_) {
      auto& ch = fabric_->channel(peer, rank_);
      while (!ids.empty() && !ch.empty() && ch.front().ready_tick <= now) {
        Request& r = requests_[ids.front()];
        LoopbackFabric::Message& m = ch.front();
        if (m.bytes.size() != r.bytes) {
          r.status = protocol_error(fmt::format(
              "loopback: rank {} sent a message of {} bytes where rank {} posted a receive of {}",
              peer, m.bytes.size(), rank_, r.bytes));
        } else if (r.bytes > 0) {
          std::memcpy(r.data, m.bytes.data(), r.bytes);
        }
        r.done = true;
        ch.pop_front();
        ids.pop_front();
        moved = true;
      }
      if (!ids.empty() && ch.empty() && fabric_->closed(peer)) {
        for (RequestId id : ids) {
          requests_[id].done = true;
          requests_[id].status =
              peer_lost(fmt::format("loopback: rank {} shut its transport down", peer));
        }
        ids.clear();
        moved = true;
      }
    }
    return moved;
  }

  std::shared_ptr<LoopbackFabric> fabric_;
  int rank_;
  RequestId next_ = 1;
  std::unordered_map<RequestId, Request> requests_;
  std::unordered_map<int, std::deque<RequestId>> pending_;  // receives per peer, posting order
  std::optional<Status> aborted_;
  bool woken_ = false;
};

}  // namespace

std::shared_ptr<LoopbackFabric> make_loopback_fabric(int size, std::uint64_t shuffle_seed) {
  return std::make_shared<LoopbackFabric>(size, shuffle_seed);
}

std::unique_ptr<Transport> loopback_transport(std::shared_ptr<LoopbackFabric> fabric, int rank) {
  return std::make_unique<LoopbackTransport>(std::move(fabric), rank);
}

std::vector<Status> on_ranks(int ranks, const std::function<Status(Communicator&)>& body,
                             std::uint64_t shuffle_seed, std::chrono::milliseconds timeout) {
  auto fabric = make_loopback_fabric(ranks, shuffle_seed);
  std::vector<Status> statuses(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      collectives::CommImpl comm(loopback_transport(fabric, r), Algorithm::kAuto, timeout,
                                 collectives::CostParams{});
      Status& status = statuses[static_cast<std::size_t>(r)];
      status = body(comm);
      if (!status.ok()) comm.transport().abort(status);
    });
  for (auto& t : threads) t.join();
  return statuses;
}

}  // namespace hoop::testing
