// What train_fashion_mnist measures and prints: per-epoch lines, the progress bar and the
// seed study's end-of-run metrics.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

namespace train_example {

/// Seconds of one rank's training loop, by where they went.
struct TimeSplit {
  double data = 0;     // copying batches out of the dataset
  double compute = 0;  // forward, loss, backward, optimizer update
  double waiting = 0;  // blocked in step() on gradient allreduces (exposed communication)
  double communication = 0;  // first gradient submitted to last one finished, each step
  double total = 0;          // the whole loop (evaluation excluded)
};

/// Bytes held by the model and the training loop on one rank.
struct MemoryBreakdown {
  std::size_t weights = 0;
  std::size_t gradients = 0;
  std::size_t optimizer_state = 0;
  std::size_t activations = 0;  // cached by forward for backward, one batch
  std::size_t workspace = 0;    // im2col columns, fp16 buffers, the batch itself
  std::size_t peak_rss = 0;     // the process's peak resident set
};

/// The run's end-of-training numbers.
struct RunSummary {
  std::string model;
  std::string strategy = "allreduce";  // how gradients were combined (--strategy)
  int workers = 1;
  int batch_per_worker = 0;
  int epochs = 0;
  std::size_t examples_per_worker = 0;  // per epoch: steps x batch per worker
  double time_n = 0;                    // seconds of training, evaluation excluded
  double throughput_1 = 0;              // samples/s of one worker; 0 when unknown
  std::string throughput_1_source;      // "--baseline-throughput", "measured on rank 0 ..."
  std::size_t updates = 0;              // parameter updates per worker, all epochs
  TimeSplit split;                      // averaged over the workers
  std::vector<std::uint64_t> staleness;  // ps-async: updates by the age of their gradients
  MemoryBreakdown memory;               // rank 0
};

/// Prints the throughput, speedup, scaling efficiency, step time, time split, the staleness
/// histogram (when there is one) and the memory breakdown.
void print_summary(std::FILE* out, const RunSummary& s);

/// A progress bar for one epoch, on stderr: redrawn in place on a terminal, one line per
/// quarter otherwise (hooprun's output is a pipe, and its lines get a rank prefix).
class ProgressBar {
 public:
  ProgressBar(int epoch, int epochs, std::size_t steps, bool enabled);
  /// After step `done` (1-based) with the running mean loss.
  void update(std::size_t done, double loss, double samples_per_s);
  /// Ends the bar's line.
  void finish();

 private:
  int epoch_;
  int epochs_;
  std::size_t steps_;
  bool enabled_;
  bool tty_;
  int last_quarter_ = 0;
  double last_draw_ = 0;
};

/// "1.23 MiB".
std::string format_bytes(std::size_t bytes);
/// Seconds since an arbitrary fixed point (steady clock).
double now_seconds();

}  // namespace train_example
