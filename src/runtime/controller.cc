#include "runtime/controller.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>

#include <algorithm>

#include "core/coarse_clock.h"
#include "core/config.h"
#include "core/log.h"

namespace hoop::runtime {
namespace {

// Tensors submitted less than this apart count as one burst and go out in one message.
constexpr std::chrono::microseconds kBurstGap{20};
// Heartbeats go out every fifth of the timeout, within these.
constexpr std::chrono::milliseconds kMinHeartbeat{50};
constexpr std::chrono::milliseconds kMaxHeartbeat{1000};
// At most this many finished nodes of each kind are kept for reuse.
constexpr std::size_t kMaxSpareNodes = 4096;

/// Keeps a finished node for reuse while there is room (else it is freed here).
template <typename Node>
void keep_spare(std::vector<Node>& spares, Node node) {
  if (!node.empty() && spares.size() < kMaxSpareNodes) spares.push_back(std::move(node));
}

/// A spare node, or an empty one where none is left.
template <typename Node>
Node take_spare(std::vector<Node>& spares) {
  if (spares.empty()) return Node();
  Node node = std::move(spares.back());
  spares.pop_back();
  return node;
}

}  // namespace

Result<RuntimeSettings> runtime_settings_from_env() {
  RuntimeSettings s;
  HOOP_ASSIGN_OR_RETURN(std::int64_t fusion, config::get_int("HOOP_FUSION_THRESHOLD"));
  s.fusion_threshold = static_cast<std::size_t>(fusion);
  // At most a minute (the variable's declared bound), so the microseconds fit.
  HOOP_ASSIGN_OR_RETURN(double cycle_ms, config::get_number("HOOP_CYCLE_TIME_MS"));
  s.cycle = std::chrono::microseconds(static_cast<std::int64_t>(cycle_ms * 1000));
  HOOP_ASSIGN_OR_RETURN(std::int64_t cache, config::get_int("HOOP_CACHE_CAPACITY"));
  s.cache_capacity = static_cast<std::size_t>(cache);
  HOOP_ASSIGN_OR_RETURN(s.stall_check, config::get_milliseconds("HOOP_STALL_CHECK_SECONDS"));
  HOOP_ASSIGN_OR_RETURN(s.stall_shutdown, config::get_milliseconds("HOOP_STALL_SHUTDOWN_SECONDS"));
  HOOP_ASSIGN_OR_RETURN(std::int64_t spin, config::get_int("HOOP_SPIN_US"));
  s.spin = std::chrono::microseconds(spin);
  Result<std::string> timeline = config::get_string("HOOP_TIMELINE");
  if (timeline.ok()) {
    s.timeline_path = *timeline;
  } else if (timeline.status().code() != StatusCode::kNotFound) {
    return timeline.status();
  }
  HOOP_ASSIGN_OR_RETURN(std::int64_t tl_max, config::get_int("HOOP_TIMELINE_MAX_BYTES"));
  s.timeline_max_bytes = static_cast<std::size_t>(tl_max);
  HOOP_ASSIGN_OR_RETURN(s.timeline_mark_cycles, config::get_bool("HOOP_TIMELINE_MARK_CYCLES"));
  HOOP_ASSIGN_OR_RETURN(s.autotune, config::get_bool("HOOP_AUTOTUNE"));
  Result<std::string> tune_log = config::get_string("HOOP_AUTOTUNE_LOG");
  if (tune_log.ok()) {
    s.autotune_options.log_path = *tune_log;
  } else if (tune_log.status().code() != StatusCode::kNotFound) {
    return tune_log.status();
  }
  HOOP_ASSIGN_OR_RETURN(std::int64_t warmup, config::get_int("HOOP_AUTOTUNE_WARMUP_SAMPLES"));
  s.autotune_options.warmup_samples = static_cast<int>(warmup);
  HOOP_ASSIGN_OR_RETURN(std::int64_t steps, config::get_int("HOOP_AUTOTUNE_STEPS_PER_SAMPLE"));
  s.autotune_options.steps_per_sample = static_cast<int>(steps);
  return s;
}

Result<std::unique_ptr<Controller>> Controller::start(const BootstrapInfo& info, Store* store,
                                                      const std::string& prefix,
                                                      const RuntimeSettings& settings,
                                                      Timeline& timeline) {
  std::unique_ptr<Controller> c(new Controller(info.rank, info.size, settings, timeline));
  // Control messages travel apart from the data: the transport matches messages per pair in
  // order, so a negotiation message must never meet a collective's receive.
  CommunicatorOptions control;
  control.key_prefix = prefix + "/control";
  control.algorithm = Algorithm::kRecursiveDoubling;
  HOOP_ASSIGN_OR_RETURN(c->control_, Communicator::create(info, store, control));
  CommunicatorOptions data;
  data.key_prefix = prefix + "/data";
  HOOP_ASSIGN_OR_RETURN(c->data_, Communicator::create(info, store, data));
  c->executor_ = std::make_unique<Executor>(*c->data_, timeline);
  c->coordinator_ = std::make_unique<Coordinator>(c->size_, settings.fusion_threshold, c->cache_);
  // Rank 0's settings decide the fusion and the cache everywhere, whatever the other ranks'
  // environment says.
  if (c->rank_ == 0)
    c->next_tuning_ = Tuning{settings.fusion_threshold, Algorithm::kAuto, -1,
                             static_cast<std::int64_t>(settings.cache_capacity)};
  if (c->rank_ == 0 && c->size_ > 1 && settings.autotune) {
    auto tuner = Autotuner::create(
        {settings.fusion_threshold, settings.cycle, Algorithm::kAuto}, settings.autotune_options);
    if (!tuner.ok()) return tuner.status().with_context("HOOP_AUTOTUNE_LOG");
    c->tuner_.emplace(std::move(*tuner));
  }
  for (int p = 0; p < c->size_; ++p)
    if (p != c->rank_) c->peers_.push_back(p);
  c->headers_.resize(static_cast<std::size_t>(c->size_));
  c->held_.resize(static_cast<std::size_t>(c->size_));
  c->goodbye_.assign(static_cast<std::size_t>(c->size_), false);
  c->heartbeat_ = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 c->control_->timeout() / 5),
                             kMinHeartbeat, kMaxHeartbeat);
  // The liveness stamps come from the coarse clock: they are read on every pass and compared
  // with intervals of tens of milliseconds.
  const auto now = coarse_now();
  c->last_heard_.assign(static_cast<std::size_t>(c->size_), now);
  c->last_sent_.assign(static_cast<std::size_t>(c->size_), now);
  c->last_liveness_check_ = now;
  for (int p : c->peers_) HOOP_RETURN_IF_ERROR(c->post_header_recv(p));
  c->last_activity_ = Clock::now();
  c->last_stall_check_ = now;
  c->thread_ = std::thread([raw = c.get()] { raw->loop(); });
  return c;
}

Status Controller::stopped(std::string_view what) const {
  if (shutdown_by_ >= 0 && shutdown_by_ != rank_)
    return aborted(fmt::format("runtime: rank {} shut down the job (hoop::shutdown) {}",
                               shutdown_by_, what));
  return aborted(fmt::format("runtime: shut down {}", what));
}

Status Controller::submit(std::span<Entry> entries) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
    if (shutdown_queued_ || stopped_) return stopped("");
    auto resubmitted = [&](const Entry& e) {
      return invalid_argument(fmt::format(
          "tensor '{}' was submitted again on rank {} before the first submission finished",
          e.request.name, rank_));
    };
    // A group queues all or nothing, so its names are looked at first; a lone tensor's insertion
    // below tells by itself.
    if (entries.size() > 1) {
      std::unordered_set<std::string_view> group;
      for (const Entry& e : entries) {
        if (in_flight_.contains(e.request.name)) return resubmitted(e);
        if (!group.insert(e.request.name).second)
          return invalid_argument(fmt::format(
              "tensor '{}' appears twice in one grouped submission on rank {}", e.request.name,
              rank_));
      }
    }
    const bool burst = !queue_.empty();
    for (Entry& e : entries) {
      auto node = take_spare(spare_names_);
      bool fresh = true;
      if (node.empty()) {
        fresh = in_flight_.insert(e.request.name).second;
      } else {
        node.value() = e.request.name;
        auto result = in_flight_.insert(std::move(node));
        fresh = result.inserted;
        if (!fresh) keep_spare(spare_names_, std::move(result.node));
      }
      if (!fresh) return resubmitted(e);
      e.handle->driver = driver();
      timeline_.begin(e.request.name, "QUEUE");
      queue_.push_back(std::move(e));
    }
    submitted_.fetch_add(1, std::memory_order_release);
    // A polling thread sees the counter; only a sleeping one needs the (syscall) wake-up.
    // One that sleeps apart from the gate is left alone for a lone tensor, which the thread
    // that waits for it sends at once, but woken once a second one queues up behind it: a
    // training step's gradients then go out while the application still computes.
    wake = sleep_ == Sleep::kPolling || (sleep_ == Sleep::kAwaiting && burst);
    if (wake) sleep_ = Sleep::kAwake;  // one wake-up per sleep
  }
  if (wake) control_->transport().wake();
  return Status::success();
}

Status Controller::join(std::shared_ptr<detail::HandleState> handle) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
    if (shutdown_queued_ || stopped_) return stopped("");
    if (join_handle_ != nullptr) return invalid_argument("join: this rank has already joined");
    join_queued_ = true;
    handle->driver = driver();
    join_handle_ = std::move(handle);
    submitted_.fetch_add(1, std::memory_order_release);
  }
  control_->transport().wake();
  return Status::success();
}

std::string Controller::next_barrier_name() {
  std::lock_guard<std::mutex> lock(mu_);
  return fmt::format("barrier.{}", barriers_++);
}

Status Controller::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_queued_ = true;
    submitted_.fetch_add(1, std::memory_order_release);
  }
  control_->transport().wake();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

bool Controller::has_outstanding() const { return !pending_.empty() || joined_ || shutting_down_; }

bool Controller::collect(RequestList& out) {
  std::vector<Entry> taken = std::move(spare_queue_);
  taken.clear();
  bool any = false;
  // Read only once something was taken and more may follow.
  std::optional<Clock::time_point> first;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Entries are large: a whole burst changes hands by swapping the vectors (`taken` is
      // empty here, and queue_ takes its room).
      taken.swap(queue_);
      if (join_queued_) {
        out.join = true;
        join_queued_ = false;
        joined_ = true;
      }
      if (shutdown_queued_) {
        out.shutdown = true;
        shutdown_queued_ = false;
        shutting_down_ = true;
      }
    }
    if (taken.empty()) break;
    // Each part of a burst is recorded as it arrives: where a core is free beside the
    // application's, the bookkeeping is done while it still submits the rest.
    if (!any) timeline_.cycle();
    any = true;
    for (Entry& e : taken) record(e, out);
    taken.clear();
    // A thread waiting on a handle submits nothing more before its wait ends: no burst to wait
    // for, and no clock to read (a lone tensor's driving thread).
    if (detail::waiting_threads.load(std::memory_order_acquire) != 0) break;
    if (!first) {
      first = Clock::now();
    } else if (Clock::now() - *first >= settings_.cycle) {
      break;
    }
    // More may be on its way: a training loop submits its gradients back to back.
    const std::uint64_t seen = submitted_.load(std::memory_order_acquire);
    const auto gap_end = Clock::now() + kBurstGap;
    bool more = false;
    while (Clock::now() < gap_end && detail::waiting_threads.load(std::memory_order_acquire) == 0) {
      if (submitted_.load(std::memory_order_acquire) != seen) {
        more = true;
        break;
      }
      ::sched_yield();
    }
    // Time also runs out while this thread waits for a core, with the submitter running:
    // whatever it submitted meanwhile belongs to the burst.
    more = more || submitted_.load(std::memory_order_acquire) != seen;
    if (!more) break;
  }
  spare_queue_ = std::move(taken);
  return any || out.join || out.shutdown;
}

void Controller::record(Entry& e, RequestList& out) {
  timeline_.end(e.request.name);
  timeline_.begin(e.request.name, "NEGOTIATE");
  // Rank 0 names cached tensors by slot too: its coordinator then counts them on the fast
  // path without copying their descriptions.
  const std::optional<std::uint32_t> slot = cache_.find(e.request);
  if (slot) {
    out.cached.push_back(*slot);
  } else {
    out.requests.push_back(e.request);
  }
  const bool carry = slot && carried_in_negotiation(e.request);
  auto node = take_spare(spare_entries_);
  Entry* kept = nullptr;
  if (node.empty()) {
    std::string name = e.request.name;
    kept = &pending_.emplace(std::move(name), std::move(e)).first->second;
  } else {
    node.key() = e.request.name;
    node.mapped() = std::move(e);
    kept = &pending_.insert(std::move(node)).position->second;
  }
  if (carry) carry_.emplace_back(*slot, kept);
}

void Controller::autotune(const ResponseList& list) {
  std::size_t bytes = 0;
  for (const Response& r : list.responses) {
    if (r.type != OpType::kAllreduce || !r.error.empty()) continue;
    for (const auto& t : r.tensors) bytes += t->bytes();
  }
  if (bytes == 0) return;
  const std::optional<TunedSettings> next = tuner_->record(bytes, Clock::now());
  if (!next) return;
  next_tuning_ = Tuning{next->fusion_threshold, next->algorithm, next->cycle.count(), -1};
}

void Controller::apply(const Tuning& tuning) {
  coordinator_->tune(static_cast<std::size_t>(tuning.fusion_threshold), tuning.algorithm);
  if (tuning.cache_capacity >= 0)
    cache_.set_capacity(static_cast<std::size_t>(tuning.cache_capacity));
  if (tuning.cycle_us < 0) return;
  settings_.cycle = std::chrono::microseconds(tuning.cycle_us);
  cycle_us_.store(tuning.cycle_us, std::memory_order_relaxed);
}

Status Controller::run_responses(const ResponseList& list) {
  // Vectors kept between calls: a lone tensor's response allocates nothing here.
  std::vector<Entry*>& entries = run_entries_;
  // This rank's entries leave pending_ as whole nodes: no Entry is moved or copied.
  std::vector<decltype(pending_)::node_type>& mine = run_nodes_;
  for (const Response& resp : list.responses) {
    entries.clear();
    entries.reserve(resp.tensors.size());
    mine.clear();
    mine.reserve(resp.tensors.size());  // &mine.back() stays valid below
    const bool joined =
        std::find(resp.joined.begin(), resp.joined.end(), rank_) != resp.joined.end();
    for (const auto& shared : resp.tensors) {
      const Request& t = *shared;
      auto it = pending_.find(t.name);
      if (it == pending_.end()) {
        // A failed tensor (a mismatch, a shutdown) fails wherever it was submitted; the ranks
        // that never submitted it have nothing to fail.
        if (!joined && resp.error.empty())
          return protocol_error(fmt::format(
              "runtime: the coordinator scheduled tensor '{}', which rank {} never submitted",
              t.name, rank_));
        entries.push_back(nullptr);
        continue;
      }
      mine.push_back(pending_.extract(it));
      entries.push_back(&mine.back().mapped());
      timeline_.end(t.name);
    }
    Status s;
    if (!resp.error.empty()) {
      s = mismatch_error(resp.error);
    } else {
      s = executor_->run(resp, entries);
      // A tensor named by its slot is in the cache with this very description already.
      for (std::size_t i = 0; i < resp.tensors.size(); ++i)
        if (resp.slots.empty() || resp.slots[i] == kNoSlot) cache_.put(resp.tensors[i]);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& node : mine) keep_spare(spare_names_, in_flight_.extract(node.key()));
    }
    for (auto& node : mine) {
      // The handle is the application's from now on; the node keeps no reference to it.
      std::shared_ptr<detail::HandleState> handle = std::move(node.mapped().handle);
      handle->finish_part(s);
      keep_spare(spare_entries_, std::move(node));
    }
    // A mismatch fails only its tensors; a failed collective means a broken job.
    if (!s.ok() && resp.error.empty()) return s;
  }
  // Every rank took part in the collectives that just completed: all of them are alive, also
  // when those collectives kept this thread from hearing heartbeats for a while.
  if (!list.responses.empty()) std::fill(last_heard_.begin(), last_heard_.end(), coarse_now());
  if (list.join_done_last >= 0 && join_handle_ != nullptr) {
    joined_ = false;
    std::shared_ptr<detail::HandleState> h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      h = std::move(join_handle_);
      join_handle_.reset();
    }
    {
      std::lock_guard<std::mutex> lock(h->mu);
      h->last_joined = list.join_done_last;
    }
    h->finish_part(Status::success());
  }
  if (list.shutdown) {
    done_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_by_ = list.shutdown_by;
  }
  return Status::success();
}

void Controller::check_stall() {
  if (rank_ != 0) return;
  const auto now = coarse_now();
  if (now - last_stall_check_ < std::chrono::milliseconds(100)) return;
  last_stall_check_ = now;
  if (settings_.stall_check.count() > 0) {
    for (const std::string& line : coordinator_->stalled(now, settings_.stall_check))
      HOOP_LOG(kWarn, "stall: {}", line);
  }
  if (settings_.stall_shutdown.count() > 0 &&
      coordinator_->stalled_longer_than(now, settings_.stall_shutdown)) {
    std::vector<std::string> lines = coordinator_->stalled(now, std::chrono::milliseconds(0));
    fail_everything(timeout_error(
        fmt::format("runtime: stalled for more than HOOP_STALL_SHUTDOWN_SECONDS={}: {}",
                    settings_.stall_shutdown.count() / 1000.0, fmt::join(lines, "; "))));
  }
}

Result<bool> Controller::step() {
  // What this rank submitted goes out first; then what the peers sent may complete a round.
  HOOP_ASSIGN_OR_RETURN(bool moved, advance());
  HOOP_ASSIGN_OR_RETURN(bool got, poll_messages());
  if (got) {
    HOOP_RETURN_IF_ERROR(advance().status());
    moved = true;
  }
  check_stall();
  if (size_ > 1 && !done_) HOOP_RETURN_IF_ERROR(check_liveness());
  return moved;
}

}  // namespace hoop::runtime
