// Elastic training (hoop/elastic.h): rounds, resets and the state that survives them.
#include "hoop/elastic.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "core/config.h"
#include "core/log.h"
#include "hoop/hoop.h"
#include "runtime/runtime_internal.h"

namespace hoop::elastic {
namespace {

[[noreturn]] void fail(Status s) { throw Error(std::move(s)); }

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

bool enabled() { return config::is_set("HOOP_ELASTIC_ID"); }

int round() { return is_initialized() ? runtime::elastic_view().round : -1; }

void report_failure(const Status& cause) { runtime::report_elastic_failure(cause); }

bool recoverable(const Status& status) {
  switch (status.code()) {
    case StatusCode::kPeerLost:
    case StatusCode::kTimeout:
    case StatusCode::kProtocolError:
    case StatusCode::kIoError:
    case StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

bool hosts_updated() {
  const runtime::ElasticView view = runtime::elastic_view();
  if (view.store == nullptr) return false;
  Result<int> latest = latest_elastic_round(*view.store);
  if (!latest.ok()) fail(latest.status().with_context("elastic: reading the newest round"));
  // Ranks may read the store on either side of hooprun's publication; the largest answer is
  // everyone's, so that all of them leave the round at the same commit.
  std::int64_t newest = *latest;
  Tensor t{&newest, DataType::kI64, {1}};
  allreduce("hoop.elastic.round", t, t, {.op = ReduceOp::kMax});
  return newest > view.round;
}

namespace {

/// Rounds in a row whose set-up may fail before a reset gives up: a peer lost while connecting
/// is cured by the next round, a failure that every round repeats is not.
constexpr int kResetAttempts = 3;

/// reset(), again while the round it joined fails to set up (a few times at most).
void reset_past_failures() {
  for (int failures = 1;; ++failures) {
    const int before = runtime::last_elastic_round();
    try {
      reset();
      return;
    } catch (const Error& e) {
      // Only a round that was joined and then failed to set up is retried (init() reported it
      // to hooprun): a worker hooprun removed, or no round in time, ends here as before.
      const bool joined = runtime::last_elastic_round() > before;
      if (!recoverable(e.status()) || !joined || failures >= kResetAttempts) throw;
      HOOP_LOG(kWarn, "elastic: setting up round {} failed ({}); joining the next round",
               runtime::last_elastic_round(), e.status().to_string());
    }
  }
}

}  // namespace

void reset() {
  const double start = now_seconds();
  const int from = round();
  shutdown();
  init();
  HOOP_LOG(kInfo, "elastic: reset from round {} to round {} (rank {} of {}) in {:.3f} s", from,
           round(), rank(), size(), now_seconds() - start);
}

HostsUpdated::HostsUpdated()
    : Error(aborted("elastic: hooprun published a new round of the job (hosts were added or "
                    "removed)")) {}

void State::add(const std::string& name, void* data, std::size_t bytes) {
  if (data == nullptr && bytes > 0)
    fail(invalid_argument(fmt::format("elastic::State::add('{}'): data is null", name)));
  if (!buffers_.emplace(name, Buffer{data, bytes, {}}).second)
    fail(invalid_argument(fmt::format("elastic::State::add: '{}' was added already", name)));
}

void State::commit() {
  save();
  check_host_updates();
}

void State::save() {
  for (auto& [name, b] : buffers_) {
    b.saved.resize(b.bytes);
    if (b.bytes > 0) std::memcpy(b.saved.data(), b.data, b.bytes);
  }
  saved_ = true;
}

void State::restore() {
  if (!saved_) return;
  for (auto& [name, b] : buffers_) {
    if (b.bytes > 0) std::memcpy(b.data, b.saved.data(), b.bytes);
  }
}

void State::sync() {
  if (size() > 1) {
    // One broadcast per buffer, all in flight at once: the runtime fuses the small ones and
    // fails naming the buffer when ranks added it with different sizes.
    std::vector<Handle> handles;
    for (auto& [name, b] : buffers_) {
      Tensor t{b.data, DataType::kU8, {static_cast<std::int64_t>(b.bytes)}};
      handles.push_back(broadcast_async("hoop.elastic.state." + name, t, 0));
    }
    for (const Handle& h : handles) h.wait();
  }
  save();
}

void State::check_host_updates() {
  if (hosts_updated()) throw HostsUpdated();
}

void State::register_reset_callback(std::function<void()> callback) {
  callbacks_.push_back(std::move(callback));
}

void State::on_reset() {
  for (const auto& callback : callbacks_) callback();
}

void run(State& state, const std::function<void()>& train) {
  if (!is_initialized()) init();
  std::optional<double> left_at;  // when the last round was given up
  while (true) {
    try {
      state.sync();
      if (left_at && rank() == 0)
        HOOP_LOG(kWarn,
                 "elastic: training again in round {} with {} ranks, {:.3f} s after leaving "
                 "the last round",
                 round(), size(), now_seconds() - *left_at);
      left_at.reset();
      train();
      return;
    } catch (const HostsUpdated&) {
      HOOP_LOG(kInfo, "elastic: the job's hosts changed; moving to the new round");
    } catch (const Error& e) {
      if (!enabled() || !recoverable(e.status())) throw;
      HOOP_LOG(kWarn, "elastic: round {} failed ({}); restoring the last commit", round(),
               e.status().to_string());
      // hooprun starts the next round when a worker ends; when none does (a peer stopped or
      // hung, a link cut), the reports are how it learns that this round is over.
      report_failure(e.status());
      state.restore();
    }
    if (!left_at) left_at = now_seconds();
    reset_past_failures();
    state.on_reset();
  }
}

}  // namespace hoop::elastic
