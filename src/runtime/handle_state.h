// The shared state behind a Handle, and a rank's record of one tensor it has submitted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "hoop/hoop.h"
#include "runtime/message.h"

namespace hoop::detail {

/// Threads of this process blocked in Handle::wait/status: once the application waits, no
/// more submissions are coming, so the background thread stops batching and sends.
inline std::atomic<int> waiting_threads{0};

/// A process set's background work, which a thread waiting on one of the set's handles may run
/// itself: the operation then completes on the waiting thread, with no hand-off to the
/// background thread and back.
class Driver {
 public:
  virtual ~Driver() = default;
  /// Runs background passes until `done` is set or `until` passes. Returns early, having run
  /// nothing, where the set cannot be driven from this thread now (its background thread
  /// sleeps inside the transport, or the set has stopped); the caller then waits.
  virtual void drive(const std::atomic<bool>& done,
                     std::chrono::steady_clock::time_point until) = 0;
  /// The waiting thread stops driving and is about to sleep: the background thread, which
  /// may doze until its next cycle meanwhile, takes the work over at once.
  virtual void stop_driving() = 0;
  /// Nobody will wait for the handle (it completes by callback): the background thread, which
  /// leaves a lone tensor to the thread that waits for it, sends it without delay.
  virtual void hand_over() = 0;
};

/// Completion of one operation (several tensors for a grouped allreduce).
struct HandleState {
  std::mutex mu;
  std::condition_variable cv;
  int parts_left = 1;
  bool done = false;
  std::atomic<bool> finished{false};  // `done`, readable without the lock; `status` is final then
  Status status;
  OwnedTensor output;
  std::vector<std::int64_t> received_splits;
  int last_joined = -1;
  std::shared_ptr<Driver> driver;  // set at submission; null for a handle no set runs
  std::function<void(const Status&)> on_done;  // Handle::on_done, called once on completion

  /// Marks one part finished with `s` (the first failure is kept); the last part completes it.
  void finish_part(const Status& s) {
    std::function<void(const Status&)> callback;
    Status outcome;
    {
      std::lock_guard<std::mutex> lock(mu);
      // Nothing changes once done: a waiting thread that sees `finished` reads `status`
      // without the lock.
      if (done) return;
      if (!s.ok() && status.ok()) status = s;
      if (--parts_left > 0) return;
      done = true;
      finished.store(true, std::memory_order_release);
      cv.notify_all();
      callback = std::move(on_done);
      outcome = status;
    }
    // Outside the lock: the callback may look at the handle (its output, its splits).
    if (callback) callback(outcome);
  }
};

}  // namespace hoop::detail

namespace hoop::runtime {

/// Where one of an entry's tensors lies. Its shape and dtype are the request's: keeping only
/// the address spares a training step two shape copies per tensor.
struct Place {
  void* data = nullptr;
  int device = kCpuDevice;
  Place() = default;
  Place(const Tensor& t) : data(t.data), device(t.device) {}  // NOLINT: a Tensor's place
};

/// A tensor submitted on this rank and not finished yet.
struct Entry {
  Request request;  // the input's description (an alltoall's first dimension is this rank's)
  Place input;
  Place output;                      // allreduce and broadcast; the others allocate into the handle
  std::vector<std::int64_t> splits;  // alltoall
  std::shared_ptr<detail::HandleState> handle;
};

}  // namespace hoop::runtime
