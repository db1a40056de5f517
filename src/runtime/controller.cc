#include "runtime/controller.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "core/coarse_clock.h"
#include "core/config.h"
#include "core/log.h"

namespace hoop::runtime {
namespace {

// Tensors submitted less than this apart count as one burst and go out in one message.
constexpr std::chrono::microseconds kBurstGap{20};
// A control message longer than this is a corrupt length, not a list of tensors.
constexpr std::uint64_t kMaxControlMessage = std::uint64_t{1} << 32;
// The length field of a heartbeat's frame, which carries no message.
constexpr std::uint64_t kHeartbeat = ~std::uint64_t{0};
// How often liveness is looked at; heartbeats go out every fifth of the timeout, within these.
constexpr std::chrono::milliseconds kLivenessCheck{50};
constexpr std::chrono::milliseconds kMinHeartbeat{50};
constexpr std::chrono::milliseconds kMaxHeartbeat{1000};
// How long a rank with nothing outstanding waits before it answers a round its peers began
// with an empty contribution: ranks that submit the same tensors a little apart then meet in
// one round instead of two (an empty answer, then a round of its own).
constexpr std::chrono::milliseconds kIdleAnswer{1};
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
  // Rank 0's settings decide the fusion everywhere, whatever the other ranks' environment says.
  if (c->rank_ == 0) c->next_tuning_ = Tuning{settings.fusion_threshold, Algorithm::kAuto, -1};
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
  // Read only once something was taken and more may follow.
  std::optional<Clock::time_point> first;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Entries are large: a whole burst changes hands by swapping the vectors.
      if (taken.empty()) {
        taken.swap(queue_);
      } else {
        std::move(queue_.begin(), queue_.end(), std::back_inserter(taken));
      }
      queue_.clear();
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
    // A thread waiting on a handle submits nothing more before its wait ends: no burst to wait
    // for, and no clock to read (a lone tensor's driving thread).
    if (taken.empty() || detail::waiting_threads.load(std::memory_order_acquire) != 0) break;
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
  if (!taken.empty()) timeline_.cycle();
  for (Entry& e : taken) {
    timeline_.end(e.request.name);
    timeline_.begin(e.request.name, "NEGOTIATE");
    // Rank 0 names cached tensors by slot too: its coordinator then counts them on the fast
    // path without copying their descriptions.
    if (auto slot = cache_.find(e.request)) {
      out.cached.push_back(*slot);
    } else {
      out.requests.push_back(e.request);
    }
    auto node = take_spare(spare_entries_);
    if (node.empty()) {
      std::string name = e.request.name;
      pending_.emplace(std::move(name), std::move(e));
    } else {
      node.key() = e.request.name;
      node.mapped() = std::move(e);
      pending_.insert(std::move(node));
    }
  }
  const bool any = !taken.empty();
  taken.clear();
  spare_queue_ = std::move(taken);
  return any || out.join || out.shutdown;
}

Status Controller::send_to_peers(std::string_view payload) {
  Transport& t = control_->transport();
  const std::size_t inline_bytes = std::min(payload.size(), kFrameInline);
  ControlFrame frame;
  frame.length = payload.size();
  std::memcpy(frame.bytes.data(), payload.data(), inline_bytes);
  // Every send is posted before any is waited for: the peers read theirs meanwhile.
  std::vector<RequestId>& ids = send_ids_;
  ids.clear();
  const auto now = coarse_now();
  for (int peer : peers_) {
    if (inline_bytes == payload.size()) {
      HOOP_ASSIGN_OR_RETURN(ids.emplace_back(), t.send(peer, &frame, sizeof(frame)));
    } else {
      HOOP_ASSIGN_OR_RETURN(ids.emplace_back(), t.send_more(peer, &frame, sizeof(frame)));
      HOOP_ASSIGN_OR_RETURN(ids.emplace_back(), t.send(peer, payload.data() + inline_bytes,
                                                       payload.size() - inline_bytes));
    }
    last_sent_[static_cast<std::size_t>(peer)] = now;
  }
  return t.wait(ids, now + control_->timeout());
}

Status Controller::post_header_recv(int peer) {
  HeaderRecv& h = headers_[static_cast<std::size_t>(peer)];
  HOOP_ASSIGN_OR_RETURN(h.id, control_->transport().recv(peer, &h.frame, sizeof(h.frame)));
  return Status::success();
}

Result<std::string> Controller::read_body(int peer, const ControlFrame& frame, Deadline deadline) {
  const std::uint64_t length = frame.length;
  if (length > kMaxControlMessage)
    return protocol_error(
        fmt::format("runtime: rank {} announced a control message of {} bytes", peer, length));
  const std::size_t inline_bytes = std::min(static_cast<std::size_t>(length), kFrameInline);
  std::string payload(static_cast<std::size_t>(length), '\0');
  std::memcpy(payload.data(), frame.bytes.data(), inline_bytes);
  if (inline_bytes == length) return payload;
  Transport& t = control_->transport();
  HOOP_ASSIGN_OR_RETURN(RequestId rest,
                        t.recv(peer, payload.data() + inline_bytes, payload.size() - inline_bytes));
  HOOP_RETURN_IF_ERROR(wait_one(t, rest, deadline));
  return payload;
}

Result<bool> Controller::poll_messages() {
  bool moved = false;
  Transport& t = control_->transport();
  for (int peer : peers_) {
    HeaderRecv& h = headers_[static_cast<std::size_t>(peer)];
    if (h.id == 0) continue;
    HOOP_ASSIGN_OR_RETURN(bool complete, t.test(h.id));
    if (!complete) continue;
    h.id = 0;
    const auto now = coarse_now();
    last_heard_[static_cast<std::size_t>(peer)] = now;
    if (h.frame.length == kHeartbeat) {
      HOOP_RETURN_IF_ERROR(post_header_recv(peer));
      continue;
    }
    HOOP_ASSIGN_OR_RETURN(std::string payload, read_body(peer, h.frame, now + control_->timeout()));
    moved = true;
    if (h.frame.length == 0) {
      // The peer has completed the shutdown round ahead of this rank: nothing follows.
      goodbye_[static_cast<std::size_t>(peer)] = true;
      continue;
    }
    HOOP_RETURN_IF_ERROR(post_header_recv(peer));
    HOOP_ASSIGN_OR_RETURN(RequestList list, decode_request_list(payload));
    auto& held = held_[static_cast<std::size_t>(peer)];
    // This round's and the next: a peer is never further ahead.
    if (held.size() == 2)
      return protocol_error(fmt::format(
          "runtime: rank {} sent a third round of negotiation while rank {} was in the first", peer,
          rank_));
    held.push_back(Held{std::move(list), Clock::now()});
  }
  return moved;
}

Result<bool> Controller::advance() {
  bool moved = false;
  while (!done_) {
    if (!sent_) {
      RequestList mine;
      const bool fresh = collect(mine);
      if (next_tuning_) {
        mine.tuning = next_tuning_;
        next_tuning_.reset();
      }
      if (!fresh && !mine.tuning && !answer_due()) break;
      HOOP_RETURN_IF_ERROR(contribute(std::move(mine)));
      moved = true;
    }
    for (int peer : peers_)
      if (held_[static_cast<std::size_t>(peer)].empty()) return moved;
    HOOP_RETURN_IF_ERROR(finish_round());
    moved = true;
  }
  return moved;
}

bool Controller::answer_due() const {
  auto oldest = Clock::time_point::max();
  for (const auto& held : held_) {
    if (held.empty()) continue;
    if (held.front().list.shutdown) return true;
    oldest = std::min(oldest, held.front().at);
  }
  if (oldest == Clock::time_point::max()) return false;
  return has_outstanding() || Clock::now() - oldest >= kIdleAnswer;
}

Status Controller::contribute(RequestList mine) {
  // The peers' coordinators see the slots in the order they decode them, which for a bit
  // vector is ascending: this rank's must count them in the same order.
  std::sort(mine.cached.begin(), mine.cached.end());
  if (size_ > 1) {
    const std::string payload = encode(mine);
    HOOP_RETURN_IF_ERROR(send_to_peers(payload));
  }
  mine_ = std::move(mine);
  sent_ = true;
  return Status::success();
}

Status Controller::finish_round() {
  const auto now = coarse_now();
  for (int r = 0; r < size_; ++r) {
    const bool own = r == rank_;
    auto& held = held_[static_cast<std::size_t>(r)];
    const RequestList& list = own ? mine_ : held.front().list;
    if (r == 0 && list.tuning) apply(*list.tuning);
    HOOP_RETURN_IF_ERROR(coordinator_->add(r, list, own ? now : held.front().at));
  }
  for (int peer : peers_) held_[static_cast<std::size_t>(peer)].pop_front();
  mine_ = RequestList();
  sent_ = false;
  if (!coordinator_->has_ready()) return Status::success();
  const ResponseList list = coordinator_->take_ready();
  HOOP_RETURN_IF_ERROR(run_responses(list));
  if (tuner_) autotune(list);
  if (!done_ || size_ == 1) return Status::success();
  HOOP_RETURN_IF_ERROR(say_goodbye());
  return collect_goodbyes();
}

Status Controller::say_goodbye() {
  // An empty message completes the receive each peer keeps posted for this rank, so that no
  // rank closes its transport with a request still pending (which would abort).
  return send_to_peers("");
}

Status Controller::collect_goodbyes() {
  Transport& t = control_->transport();
  const Deadline deadline = coarse_now() + control_->timeout();
  for (int peer : peers_) {
    if (goodbye_[static_cast<std::size_t>(peer)]) continue;
    HeaderRecv& h = headers_[static_cast<std::size_t>(peer)];
    while (true) {
      HOOP_RETURN_IF_ERROR(wait_one(t, h.id, deadline));
      if (h.frame.length == kHeartbeat) {
        HOOP_RETURN_IF_ERROR(post_header_recv(peer));
        continue;
      }
      HOOP_RETURN_IF_ERROR(read_body(peer, h.frame, deadline).status());
      if (h.frame.length == 0) break;
      return protocol_error(fmt::format(
          "runtime: rank {} sent a round of negotiation after the shutdown round", peer));
    }
    h.id = 0;
  }
  return Status::success();
}

void Controller::autotune(const ResponseList& list) {
  std::size_t bytes = 0;
  for (const Response& r : list.responses) {
    if (r.type != OpType::kAllreduce || !r.error.empty()) continue;
    for (const Request& t : r.tensors) bytes += t.count() * dtype_size(t.dtype);
  }
  if (bytes == 0) return;
  const std::optional<TunedSettings> next = tuner_->record(bytes, Clock::now());
  if (!next) return;
  next_tuning_ = Tuning{next->fusion_threshold, next->algorithm, next->cycle.count()};
}

void Controller::apply(const Tuning& tuning) {
  coordinator_->tune(static_cast<std::size_t>(tuning.fusion_threshold), tuning.algorithm);
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
    for (const Request& t : resp.tensors) {
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

Status Controller::send_heartbeats() {
  Transport& t = control_->transport();
  const auto now = coarse_now();
  for (int peer : peers_) {
    auto& sent = last_sent_[static_cast<std::size_t>(peer)];
    if (now - sent < heartbeat_) continue;
    sent = now;
    ControlFrame frame;
    frame.length = kHeartbeat;
    HOOP_ASSIGN_OR_RETURN(RequestId id, t.send(peer, &frame, sizeof(frame)));
    HOOP_RETURN_IF_ERROR(wait_one(t, id, now + control_->timeout()));
  }
  return Status::success();
}

Status Controller::check_liveness() {
  const auto now = coarse_now();
  if (now - last_liveness_check_ < kLivenessCheck) return Status::success();
  last_liveness_check_ = now;
  HOOP_RETURN_IF_ERROR(send_heartbeats());
  const auto limit = control_->timeout();
  for (int peer : peers_) {
    const auto quiet = now - last_heard_[static_cast<std::size_t>(peer)];
    if (quiet <= limit) continue;
    return peer_lost(fmt::format(
        "runtime: rank {} has not answered for {:.1f} s (the limit is HOOP_TIMEOUT_SECONDS={}): "
        "it is stopped, hung or cut off",
        peer, std::chrono::duration<double>(quiet).count(),
        std::chrono::duration<double>(limit).count()));
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
