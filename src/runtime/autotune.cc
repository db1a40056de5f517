#include "runtime/autotune.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/log.h"

namespace hoop::runtime {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kFusionCandidates[] = {0, kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB, 128 * kMiB};
constexpr std::chrono::microseconds kCycleCandidates[] = {
    std::chrono::microseconds(500), std::chrono::microseconds(1000),
    std::chrono::microseconds(2500), std::chrono::microseconds(5000),
    std::chrono::microseconds(10000)};
constexpr Algorithm kAlgorithmCandidates[] = {Algorithm::kAuto, Algorithm::kRing,
                                              Algorithm::kRecursiveDoubling, Algorithm::kTree,
                                              Algorithm::kRabenseifner};
constexpr const char* kKnobNames[] = {"fusion threshold", "cycle time", "algorithm"};

double cycle_ms(const TunedSettings& s) { return static_cast<double>(s.cycle.count()) / 1000.0; }

std::string describe(const TunedSettings& s) {
  return fmt::format("fusion threshold {} bytes, cycle time {} ms, algorithm {}",
                     s.fusion_threshold, cycle_ms(s), algorithm_name(s.algorithm));
}

std::string knob_value(const TunedSettings& s, int knob) {
  if (knob == 0) return fmt::format("{} bytes", s.fusion_threshold);
  if (knob == 1) return fmt::format("{} ms", cycle_ms(s));
  return std::string(algorithm_name(s.algorithm));
}

double mb_per_s(double bytes_per_s) { return bytes_per_s / 1e6; }

}  // namespace

Result<Autotuner> Autotuner::create(const TunedSettings& initial, const AutotuneOptions& options) {
  if (options.steps_per_sample < 1 || options.samples_per_trial < 1 || options.warmup_samples < 0)
    return invalid_argument(fmt::format(
        "autotune: steps per sample ({}) and samples per trial ({}) must be at least 1, warmup "
        "samples ({}) at least 0",
        options.steps_per_sample, options.samples_per_trial, options.warmup_samples));
  Autotuner t(initial, options);
  if (!options.log_path.empty()) {
    t.log_.open(options.log_path, std::ios::out | std::ios::trunc);
    if (!t.log_)
      return io_error(fmt::format("autotune: cannot create the log {}", options.log_path));
    t.log_ << "trial,knob,fusion_threshold_bytes,cycle_time_ms,algorithm,score_bytes_per_s\n";
    t.log_.flush();
  }
  return t;
}

Autotuner::Autotuner(const TunedSettings& initial, const AutotuneOptions& options)
    : options_(options),
      initial_(initial),
      current_(initial),
      best_(initial),
      warmup_left_(options.warmup_samples) {}

std::optional<TunedSettings> Autotuner::record(std::size_t bytes, Clock::time_point now) {
  if (done_) return std::nullopt;
  if (!sample_start_) {  // the first step only opens the first sample: its start is unknown
    sample_start_ = now;
    return std::nullopt;
  }
  bytes_ += bytes;
  if (++steps_ < options_.steps_per_sample) return std::nullopt;
  const double seconds = std::chrono::duration<double>(now - *sample_start_).count();
  const double score = seconds > 0 ? static_cast<double>(bytes_) / seconds : 0.0;
  sample_start_ = now;
  bytes_ = 0;
  steps_ = 0;
  if (warmup_left_ > 0) {
    --warmup_left_;
    return std::nullopt;
  }
  if (settle_left_ > 0) {
    --settle_left_;
    return std::nullopt;
  }
  scores_.push_back(score);
  if (static_cast<int>(scores_.size()) < options_.samples_per_trial) return std::nullopt;
  std::nth_element(scores_.begin(), scores_.begin() + static_cast<long>(scores_.size() / 2),
                   scores_.end());
  const Trial trial{current_, scores_[scores_.size() / 2], trials_.empty() ? -1 : knob_};
  scores_.clear();
  settle_left_ = 1;
  trials_.push_back(trial);
  write_trial(trial);
  if (trials_.size() == 1) initial_score_ = trial.score;
  if (trial.score > best_score_) {
    best_score_ = trial.score;
    best_ = trial.settings;
  }
  if (advance()) return current_;
  finish();
  if (current_ == best_) return std::nullopt;
  current_ = best_;
  return current_;
}

std::vector<TunedSettings> Autotuner::candidates(int knob) const {
  std::vector<TunedSettings> out;
  TunedSettings s = best_;
  if (knob == 0) {
    for (std::size_t f : kFusionCandidates) out.push_back((s.fusion_threshold = f, s));
  } else if (knob == 1) {
    for (auto c : kCycleCandidates) out.push_back((s.cycle = c, s));
  } else {
    for (Algorithm a : kAlgorithmCandidates) out.push_back((s.algorithm = a, s));
  }
  return out;
}

bool Autotuner::advance() {
  for (; knob_ < 3; ++knob_, candidate_ = 0) {
    const std::vector<TunedSettings> c = candidates(knob_);
    while (candidate_ < c.size()) {
      const TunedSettings& next = c[candidate_++];
      const bool tried = std::any_of(trials_.begin(), trials_.end(),
                                     [&](const Trial& t) { return t.settings == next; });
      if (!tried) {
        current_ = next;
        return true;
      }
    }
  }
  return false;
}

void Autotuner::write_trial(const Trial& t) {
  HOOP_LOG(kInfo, "autotune: trial {} ({}): {:.2f} MB/s", trials_.size(), describe(t.settings),
           mb_per_s(t.score));
  if (!log_.is_open()) return;
  log_ << fmt::format("{},{},{},{},{},{:.0f}\n", trials_.size(),
                      t.knob < 0 ? "start" : kKnobNames[t.knob], t.settings.fusion_threshold,
                      cycle_ms(t.settings), algorithm_name(t.settings.algorithm), t.score);
  log_.flush();
}

void Autotuner::finish() {
  done_ = true;
  const double gain = initial_score_ > 0 ? (best_score_ / initial_score_ - 1) * 100 : 0;
  std::vector<std::string> report;
  report.push_back(fmt::format("chosen after {} trials: {}, scoring {:.2f} MB/s of allreduce",
                               trials_.size(), describe(best_), mb_per_s(best_score_)));
  report.push_back(
      fmt::format("the settings the job started with ({}) scored {:.2f} MB/s: "
                  "the choice is {:+.1f}%",
                  describe(initial_), mb_per_s(initial_score_), gain));
  // Why, knob by knob: every value its pass compared, the best first. A pass held the other
  // knobs at the values of its trials; an earlier trial with those values counts too (the pass
  // did not run it again).
  for (int knob = 0; knob < 3; ++knob) {
    TunedSettings held = best_;
    for (const Trial& t : trials_) {
      if (t.knob == knob) {
        held = t.settings;
        break;
      }
    }
    std::vector<const Trial*> tried;
    for (const Trial& t : trials_) {
      TunedSettings rest_t = t.settings, rest_h = held;
      if (knob == 0) rest_t.fusion_threshold = rest_h.fusion_threshold = 0;
      if (knob == 1) rest_t.cycle = rest_h.cycle = {};
      if (knob == 2) rest_t.algorithm = rest_h.algorithm = Algorithm::kAuto;
      if (rest_t == rest_h) tried.push_back(&t);
    }
    std::sort(tried.begin(), tried.end(),
              [](const Trial* a, const Trial* b) { return a->score > b->score; });
    std::string line = fmt::format("{}:", kKnobNames[knob]);
    for (const Trial* t : tried)
      line += fmt::format(" {} {:.2f} MB/s;", knob_value(t->settings, knob), mb_per_s(t->score));
    if (!tried.empty()) line.pop_back();
    report.push_back(line + " (the other knobs as that pass held them)");
  }
  for (const std::string& line : report) {
    HOOP_LOG(kInfo, "autotune: {}", line);
    if (log_.is_open()) log_ << "# " << line << "\n";
  }
  if (log_.is_open()) log_.flush();
}

}  // namespace hoop::runtime
