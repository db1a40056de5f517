// The thread that runs a communicator's non-blocking calls (hoop/communicator.h): one per set
// of connections, shared by the communicators split from them, because a transport is driven by
// one thread at a time and calls over shared connections must keep one order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "hoop/communicator.h"

namespace hoop {

/// What a Request waits on: set once, by the queue's thread.
struct RequestState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
};

}  // namespace hoop

namespace hoop::collectives {

/// Runs queued calls one at a time, in the order they were queued, on a thread of its own
/// (started by the first call).
class AsyncQueue {
 public:
  AsyncQueue() = default;
  AsyncQueue(const AsyncQueue&) = delete;
  AsyncQueue& operator=(const AsyncQueue&) = delete;
  /// Runs what is still queued (each call has its deadline), then ends the thread.
  ~AsyncQueue();

  /// Queues `call`; the returned state completes with its status.
  std::shared_ptr<RequestState> submit(std::function<Status()> call);
  /// Returns once nothing is queued or running; at once on the queue's own thread (a call
  /// it runs makes further calls) and when nothing was ever queued.
  void drain();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<Status()>, std::shared_ptr<RequestState>>> queue_;
  bool running_ = false;
  bool stop_ = false;
  std::atomic<bool> started_{false};
  std::thread::id worker_id_;
  std::thread worker_;
};

}  // namespace hoop::collectives
