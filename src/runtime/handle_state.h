// The shared state behind a Handle, and a rank's record of one tensor it has submitted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "hoop/hoop.h"
#include "runtime/message.h"

namespace hoop::detail {

/// Threads of this process blocked in Handle::wait/status: once the application waits, no
/// more submissions are coming, so the background thread stops batching and sends.
inline std::atomic<int> waiting_threads{0};

/// Completion of one operation (several tensors for a grouped allreduce).
struct HandleState {
  std::mutex mu;
  std::condition_variable cv;
  int parts_left = 1;
  bool done = false;
  std::atomic<bool> finished{false};  // `done`, readable without the lock
  Status status;
  OwnedTensor output;
  std::vector<std::int64_t> received_splits;
  int last_joined = -1;

  /// Marks one part finished with `s` (the first failure is kept); the last part completes it.
  void finish_part(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (!s.ok() && status.ok()) status = s;
    if (--parts_left <= 0 && !done) {
      done = true;
      finished.store(true, std::memory_order_release);
      cv.notify_all();
    }
  }
};

}  // namespace hoop::detail

namespace hoop::runtime {

/// A tensor submitted on this rank and not finished yet.
struct Entry {
  Request request;
  Tensor input;
  Tensor output;                     // allreduce and broadcast; the others allocate into the handle
  std::vector<std::int64_t> splits;  // alltoall
  std::shared_ptr<detail::HandleState> handle;
};

}  // namespace hoop::runtime
