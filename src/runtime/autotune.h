// The runtime's autotuner (HOOP_AUTOTUNE, hooprun --autotune; Horovod's HOROVOD_AUTOTUNE):
// rank 0 of the global process set tries settings of the fusion threshold, the cycle time and
// the allreduce algorithm while the job trains, scores each by the allreduce bytes per second
// the job achieves under it, and keeps the best.
//
// The search is a coordinate descent, one pass over each knob in turn (fusion threshold, then
// cycle time, then algorithm), each candidate tried with the best of the knobs before it. That
// takes 6 + 5 + 5 trials at most, where Horovod's Bayesian optimization takes 20 samples or more
// by default; the knobs interact little (fusion sets the message sizes the algorithm sees, the
// cycle time how many tensors a message carries), and every trial is a median over several
// samples, which this noisy a measurement needs more than a clever next guess.
//
// A trial: one sample to let the new settings take effect (its score is discarded), then
// `samples_per_trial` samples of `steps_per_sample` steps each (a step is one list of
// responses that moved allreduce bytes); the score is the median of the samples' bytes per
// second. The first `warmup_samples` samples of the job are discarded before any trial
// (start-up: allocations, connections, the response cache filling).
#pragma once

#include <chrono>
#include <cstddef>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/core.h"

namespace hoop::runtime {

/// What the autotuner sets.
struct TunedSettings {
  std::size_t fusion_threshold = 0;
  std::chrono::microseconds cycle{0};
  Algorithm algorithm = Algorithm::kAuto;

  bool operator==(const TunedSettings&) const = default;
};

struct AutotuneOptions {
  int warmup_samples = 3;
  int steps_per_sample = 10;
  int samples_per_trial = 3;
  /// Where each trial and the final choice are written (CSV, then "#" report lines); empty:
  /// the log only.
  std::string log_path = {};
};

class Autotuner {
 public:
  using Clock = std::chrono::steady_clock;

  /// Starts from `initial` (the settings the job was launched with; the first trial measures
  /// them). The log file is created here: an io_error names it when it cannot be.
  static Result<Autotuner> create(const TunedSettings& initial, const AutotuneOptions& options);

  /// Records one step that moved `bytes` allreduce bytes, finished at `now`. Returns the
  /// settings to switch to when they change (a new trial, or the final choice).
  std::optional<TunedSettings> record(std::size_t bytes, Clock::time_point now);

  /// Whether the search is over (the best settings are in force).
  bool done() const { return done_; }
  /// The settings in force.
  const TunedSettings& current() const { return current_; }
  /// The trials so far: settings and score (bytes per second).
  struct Trial {
    TunedSettings settings;
    double score = 0;
    int knob = 0;  // the knob it varied: 0 fusion, 1 cycle, 2 algorithm
  };
  const std::vector<Trial>& trials() const { return trials_; }

 private:
  Autotuner(const TunedSettings& initial, const AutotuneOptions& options);
  /// The candidates of the current knob, with the best settings so far for the others.
  std::vector<TunedSettings> candidates(int knob) const;
  /// Moves to the next untried candidate (or knob); false when the search is over.
  bool advance();
  void write_trial(const Trial& t);
  void finish();

  AutotuneOptions options_;
  std::ofstream log_;
  TunedSettings initial_;
  TunedSettings current_;
  TunedSettings best_;
  double best_score_ = -1;
  double initial_score_ = -1;
  std::vector<Trial> trials_;
  int knob_ = 0;
  std::size_t candidate_ = 0;
  int warmup_left_;
  int settle_left_ = 1;  // a trial's first sample lets its settings take effect
  std::vector<double> scores_;
  int steps_ = 0;
  std::size_t bytes_ = 0;
  std::optional<Clock::time_point> sample_start_;
  bool done_ = false;
};

}  // namespace hoop::runtime
