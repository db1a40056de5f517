// A process set's threads (controller.h): the background thread's loop and how it sleeps, and
// the gate through which an application thread that waits on a handle runs the passes itself.
#include <sched.h>

#include <algorithm>

#include "core/cpu_relax.h"
#include "core/log.h"
#include "runtime/controller.h"

namespace hoop::runtime {
namespace {

// The longest the thread sleeps between stall checks, with and without work outstanding.
constexpr std::chrono::milliseconds kActiveWake{100};
constexpr std::chrono::milliseconds kIdleWake{1000};
// The longest the background thread awaits messages without the gate while work is
// outstanding: a dead peer's pidfd is looked at only by a pass.
constexpr std::chrono::milliseconds kAwaitSlice{10};
// The shortest the background thread dozes between looks at its queue when nobody wakes it.
constexpr std::chrono::microseconds kMinIdleCycle{100};
// Awaits in a row that return early with nothing to do before the thread sleeps a cycle deaf
// to messages (bytes a ring holds that no receive takes would otherwise wake it at once).
constexpr int kMaxIdleAwaits = 8;
// Idle passes a driving thread makes between two yields of its core.
constexpr unsigned kYieldEvery = 8;

}  // namespace

/// What a waiting application thread drives (HandleState::driver): the controller while it
/// exists. Its mutex is the one a pass runs under.
struct Controller::Gate final : detail::Driver {
  std::mutex mu;
  std::mutex owner_mu;          // held to read `owner` without `mu` (set with both held)
  Controller* owner = nullptr;  // null once the controller has stopped
  std::atomic<int> wanted{0};   // application threads trying to take `mu`

  void drive(const std::atomic<bool>& done, Clock::time_point until) override {
    wanted.fetch_add(1, std::memory_order_acq_rel);
    std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
    while (!lock.owns_lock()) {
      if (done.load(std::memory_order_acquire) || Clock::now() >= until) break;
      ::sched_yield();
      lock.try_lock();
    }
    wanted.fetch_sub(1, std::memory_order_acq_rel);
    if (lock.owns_lock() && owner != nullptr) owner->drive(done, until);
  }

  void stop_driving() override {
    // Not `mu`: the background thread may hold it while it sleeps in poll().
    std::lock_guard<std::mutex> lock(owner_mu);
    if (owner != nullptr) owner->wake_background();
  }

  void hand_over() override {
    std::lock_guard<std::mutex> lock(owner_mu);
    if (owner != nullptr) owner->hand_over();
  }
};

std::shared_ptr<detail::Driver> Controller::driver() const { return gate_; }

Controller::Controller(int rank, int size, const RuntimeSettings& settings, Timeline& timeline)
    : rank_(rank),
      size_(size),
      settings_(settings),
      timeline_(timeline),
      cache_(settings.cache_capacity),
      cycle_us_(settings.cycle.count()) {
  gate_ = std::make_shared<Gate>();
  gate_->owner = this;
}

Controller::~Controller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    if (failure_.ok() && !done_) failure_ = aborted("runtime: the process set was removed");
  }
  if (control_ != nullptr) control_->transport().wake();
  if (thread_.joinable()) thread_.join();
  // A thread still waiting on one of the set's handles finds the set gone.
  std::lock_guard<std::mutex> drive(gate_->mu);
  std::lock_guard<std::mutex> owner(gate_->owner_mu);
  gate_->owner = nullptr;
}

void Controller::loop() {
  std::unique_lock<std::mutex> drive(gate_->mu, std::defer_lock);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_ || !failure_.ok()) break;
    }
    if (!can_await_) {
      drive.lock();
    } else if (gate_->wanted.load(std::memory_order_acquire) > 0 || !drive.try_lock()) {
      // An application thread runs the passes (or is about to): stay out of its way.
      stand_by();
      continue;
    }
    const Pass pass = run_pass();
    if (pass == Pass::kEnd) break;
    if (pass == Pass::kMoved) {
      idle_awaits_ = 0;
      drive.unlock();
      continue;
    }
    idle_wait(has_outstanding(), drive);
  }
  if (!drive.owns_lock()) drive.lock();
  // Whatever is still waiting fails with the cause (or the shutdown).
  Status why;
  std::shared_ptr<detail::HandleState> join;
  {
    std::lock_guard<std::mutex> lock(mu_);
    why = failure_.ok() ? stopped("before the operation ran") : failure_;
    for (Entry& e : queue_) pending_.emplace(e.request.name, std::move(e));
    queue_.clear();
    in_flight_.clear();
    join = std::move(join_handle_);
    join_handle_.reset();
    stopped_ = true;
  }
  for (auto& [name, e] : pending_) e.handle->finish_part(why);
  pending_.clear();
  // Entries a failed response list had taken out of pending_ before it stopped.
  for (auto& node : run_nodes_)
    if (!node.empty() && node.mapped().handle != nullptr) node.mapped().handle->finish_part(why);
  run_nodes_.clear();
  if (join != nullptr) join->finish_part(why);
}

void Controller::fail_everything(const Status& cause) {
  HOOP_LOG(kError, "runtime: {}", cause.to_string());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.ok()) failure_ = cause;
  }
  // The peers learn the original cause from the aborts, not from a closed connection.
  control_->transport().abort(cause);
  data_->transport().abort(cause);
  // The background thread may sleep apart from the transport (await_activity) while an
  // application thread failed: it fails what is still pending.
  control_->transport().wake();
}

void Controller::idle_wait(bool active, std::unique_lock<std::mutex>& drive) {
  const auto now = Clock::now();
  const bool driven = gate_->wanted.load(std::memory_order_acquire) > 0;
  if (active && !driven && now - last_activity_ < settings_.spin) {
    drive.unlock();
    ::sched_yield();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!queue_.empty() || join_queued_ || shutdown_queued_ || stopped_) {
      drive.unlock();
      return;
    }
    sleep_ = can_await_ ? Sleep::kAwaiting : Sleep::kPolling;
  }
  // Sleeps until a message arrives on the control connections or submit() wakes the
  // transport; the timeout only paces the coordinator's stall checks.
  auto timeout = std::min<std::chrono::microseconds>(active ? kActiveWake : kIdleWake, heartbeat_);
  bool awaited = false;
  if (can_await_) {  // not sleep_, which submit() may change from now on
    // Messages wake the thread only while this rank waits for something. Otherwise nothing
    // can be negotiated before this rank submits, and its submissions wake nobody: the
    // thread looks for them once a cycle, unless the thread that waits for them runs them.
    // Bytes that no receive takes would end every await at once: after a few such turns in a
    // row with nothing moving (on any thread) the thread sleeps a cycle deaf to messages.
    if (last_activity_ != activity_seen_) idle_awaits_ = 0;
    activity_seen_ = last_activity_;
    const bool messages = active && idle_awaits_ < kMaxIdleAwaits;
    timeout = messages ? std::min<std::chrono::microseconds>(timeout, kAwaitSlice) : idle_cycle();
    drive.unlock();
    const auto start = Clock::now();
    awaited = control_->transport().await_activity(timeout, messages);
    if (!awaited) {
      can_await_ = false;
      drive.lock();
    } else if (!messages) {
      idle_awaits_ = 0;
    } else if (Clock::now() - start < timeout) {
      ++idle_awaits_;  // reset by the next pass that moves something
    }
  }
  if (!awaited) {
    control_->transport().poll(timeout);
    drive.unlock();
  }
  std::lock_guard<std::mutex> lock(mu_);
  sleep_ = Sleep::kAwake;
}

std::chrono::microseconds Controller::idle_cycle() const {
  return std::clamp<std::chrono::microseconds>(
      std::chrono::microseconds(cycle_us_.load(std::memory_order_relaxed)), kMinIdleCycle,
      kAwaitSlice);
}

void Controller::stand_by() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || !failure_.ok()) return;
    sleep_ = Sleep::kAwaiting;
  }
  control_->transport().await_activity(idle_cycle(), false);
  std::lock_guard<std::mutex> lock(mu_);
  sleep_ = Sleep::kAwake;
}

void Controller::hand_over() {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // One wake-up per sleep; an awake thread collects the tensor anyway.
    wake = sleep_ != Sleep::kAwake;
    if (wake) sleep_ = Sleep::kAwake;
  }
  if (wake) control_->transport().wake();
}

void Controller::wake_background() {
  // Unconditionally: the background thread may be about to stand by (it saw this thread
  // driving), and a wake-up it has not slept yet ends its next sleep at once.
  control_->transport().wake();
}

Controller::Pass Controller::run_pass() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || !failure_.ok()) return Pass::kEnd;
  }
  if (done_) return Pass::kEnd;
  Result<bool> moved = step();
  if (!moved.ok()) {
    fail_everything(moved.status());
    return Pass::kEnd;
  }
  if (done_) return Pass::kEnd;
  if (!*moved) return Pass::kIdle;
  last_activity_ = Clock::now();
  return Pass::kMoved;
}

void Controller::drive(const std::atomic<bool>& done, Clock::time_point until) {
  unsigned idle = 0;
  while (!done.load(std::memory_order_acquire)) {
    const Pass pass = run_pass();
    if (pass == Pass::kEnd) break;
    if (pass == Pass::kMoved) {
      idle = 0;
      continue;
    }
    // The answer usually comes within a microsecond or two: a system call or a clock read per
    // idle pass would delay noticing it. Past a few passes, yielding lets a rank that shares
    // this core (a crowded host) run the part this one waits for.
    if (++idle % kYieldEvery != 0) {
      cpu_relax();
      continue;
    }
    if (Clock::now() >= until) return;
    ::sched_yield();
  }
  // A pass here that ended the runtime (a shutdown list) leaves the exit to the background
  // thread, which may sleep.
  if (done_) control_->transport().wake();
}

}  // namespace hoop::runtime
