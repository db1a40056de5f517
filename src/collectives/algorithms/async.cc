// Non-blocking calls: the AsyncQueue, Request, and the i-forms of the public calls.
#include "collectives/algorithms/async.h"

#include <exception>

#include "collectives/algorithms/comm_impl.h"

namespace hoop {
namespace collectives {

AsyncQueue::~AsyncQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::shared_ptr<RequestState> AsyncQueue::submit(std::function<Status()> call) {
  auto state = std::make_shared<RequestState>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(call), state);
    if (!worker_.joinable()) {
      worker_ = std::thread([this] { loop(); });
      worker_id_ = worker_.get_id();
      started_ = true;
    }
  }
  cv_.notify_all();
  return state;
}

void AsyncQueue::drain() {
  if (!started_) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (std::this_thread::get_id() == worker_id_) return;
  cv_.wait(lock, [&] { return queue_.empty() && !running_; });
}

void AsyncQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, with everything run
    auto [call, state] = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    Status status;
    try {
      status = call();
    } catch (const std::exception& e) {  // bad_alloc, or an exception from a caller's type
      status = internal_error(std::string("non-blocking call threw: ") + e.what());
    }
    {
      std::lock_guard<std::mutex> done(state->mu);
      state->status = std::move(status);
      state->done = true;
    }
    state->cv.notify_all();
    lock.lock();
    running_ = false;
    cv_.notify_all();  // drain() waits for this
  }
}

}  // namespace collectives

namespace {

Request finished(Status status) {
  auto state = std::make_shared<RequestState>();
  state->status = std::move(status);
  state->done = true;
  return Request(std::move(state));
}

/// Queues `body` on the thread of `comm`'s connections.
Request start(Communicator& comm, std::function<Status()> body) {
  auto* impl = collectives::impl_of(comm);
  if (impl == nullptr)
    return finished(invalid_argument(
        "non-blocking calls need a communicator built by Communicator::create or split"));
  return Request(impl->async().submit(std::move(body)));
}

template <typename Options>
Request start(Communicator& comm, Status (*call)(Communicator&, const Options&),
              const Options& options) {
  return start(comm, [&comm, call, options] { return call(comm, options); });
}

}  // namespace

Result<bool> Request::test() {
  if (state_ == nullptr) return invalid_argument("test: the request stands for no call");
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->done) return false;
  if (!state_->status.ok()) return state_->status;
  return true;
}

Status Request::wait() {
  if (state_ == nullptr) return invalid_argument("wait: the request stands for no call");
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->status;
}

Status wait_all(std::span<Request> requests) {
  Status first;
  for (Request& r : requests) {
    Status s = r.wait();
    if (first.ok() && !s.ok()) first = std::move(s);
  }
  return first;
}

Request iallreduce(Communicator& comm, const AllreduceOptions& o) {
  return start(comm, &allreduce, o);
}
Request ibroadcast(Communicator& comm, const BroadcastOptions& o) {
  return start(comm, &broadcast, o);
}
Request iallgather(Communicator& comm, const AllgatherOptions& o) {
  return start(comm, &allgather, o);
}
Request iallgatherv(Communicator& comm, const AllgathervOptions& o) {
  return start(comm, &allgatherv, o);
}
Request ireduce_scatter(Communicator& comm, const ReduceScatterOptions& o) {
  return start(comm, &reduce_scatter, o);
}
Request ireduce_scatterv(Communicator& comm, const ReduceScattervOptions& o) {
  return start(comm, &reduce_scatterv, o);
}
Request ialltoall(Communicator& comm, const AlltoallOptions& o) {
  return start(comm, &alltoall, o);
}
Request ialltoallv(Communicator& comm, const AlltoallvOptions& o) {
  return start(comm, &alltoallv, o);
}
Request ibarrier(Communicator& comm) {
  return start(comm, [&comm] { return barrier(comm); });
}
Request ireduce(Communicator& comm, const RootReduceOptions& o) { return start(comm, &reduce, o); }
Request igather(Communicator& comm, const GatherOptions& o) { return start(comm, &gather, o); }
Request igatherv(Communicator& comm, const GathervOptions& o) { return start(comm, &gatherv, o); }
Request iscatter(Communicator& comm, const ScatterOptions& o) { return start(comm, &scatter, o); }
Request iscatterv(Communicator& comm, const ScattervOptions& o) {
  return start(comm, &scatterv, o);
}
Request isendrecv(Communicator& comm, const SendOptions& to, const RecvOptions& from) {
  return start(comm, [&comm, to, from] { return sendrecv(comm, to, from); });
}

}  // namespace hoop
