#include "report.h"

#include <unistd.h>

#include <chrono>
#include <string>

#include <fmt/format.h>

namespace train_example {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string format_bytes(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

namespace {

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

}  // namespace

namespace {

// "staleness  0: 812 (50.1 %), 1: 790 (48.8 %), ...; mean 0.51 updates": the updates by how
// many other updates landed between the pull their gradients were computed on and their own.
std::string staleness_line(const std::vector<std::uint64_t>& counts) {
  double total = 0;
  double weighted = 0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    total += static_cast<double>(counts[k]);
    weighted += static_cast<double>(k * counts[k]);
  }
  std::string line = "staleness (updates)           ";
  const char* sep = " ";
  for (std::size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] == 0) continue;
    const bool last = k + 1 == counts.size();
    line += fmt::format("{}{}{}: {} ({:.1f} %)", sep, k, last ? "+" : "", counts[k],
                        percent(static_cast<double>(counts[k]), total));
    sep = ", ";
  }
  return line + fmt::format("; mean {:.2f}\n", total > 0 ? weighted / total : 0.0);
}

}  // namespace

void print_summary(std::FILE* out, const RunSummary& s) {
  const double examples =
      static_cast<double>(s.examples_per_worker) * s.epochs * s.workers;
  const double throughput_n = s.time_n > 0 ? examples / s.time_n : 0.0;
  std::string text = fmt::format(
      "== summary: {}, {} worker(s), batch {} per worker ({} global), {} epoch(s), {}\n"
      "examples per worker per epoch  {}\n"
      "time_n                         {:.2f} s (training loop, evaluation excluded)\n"
      "throughput_n                   {:.1f} samples/s (examples x epochs x workers / time_n)\n",
      s.model, s.workers, s.batch_per_worker, s.batch_per_worker * s.workers, s.epochs,
      s.strategy, s.examples_per_worker, s.time_n, throughput_n);
  if (s.throughput_1 > 0) {
    const double speedup = throughput_n / s.throughput_1;
    text += fmt::format(
        "throughput_1                   {:.1f} samples/s ({})\n"
        "speedup_n                      {:.2f} (throughput_n / throughput_1)\n"
        "scaling efficiency             {:.1f} % (speedup_n / {} workers)\n",
        s.throughput_1, s.throughput_1_source, speedup, 100.0 * speedup / s.workers,
        s.workers);
  } else {
    text += "throughput_1                   not measured (--baseline-steps 0 and no "
            "--baseline-throughput)\n";
  }
  const TimeSplit& t = s.split;
  if (s.updates > 0) {
    const double per = 1e3 / static_cast<double>(s.updates);
    text += fmt::format(
        "step time                      {:.2f} ms (time_n / {} updates); compute {:.2f} ms, "
        "waiting {:.2f} ms per step (mean over workers)\n",
        s.time_n * per, s.updates, t.compute * per, t.waiting * per);
  }
  const double other = std::max(0.0, t.total - t.data - t.compute - t.waiting);
  text += fmt::format(
      "time split (mean over workers) compute {:.2f} s ({:.1f} %), waiting for gradients "
      "{:.2f} s ({:.1f} %), data {:.2f} s ({:.1f} %), other {:.2f} s ({:.1f} %)\n"
      "communication                  {:.2f} s from first gradient sent to last averaged, "
      "summed over steps ({:.1f} % of the loop; overlaps backward)\n",
      t.compute, percent(t.compute, t.total), t.waiting, percent(t.waiting, t.total), t.data,
      percent(t.data, t.total), other, percent(other, t.total), t.communication,
      percent(t.communication, t.total));
  if (!s.staleness.empty()) text += staleness_line(s.staleness);
  const MemoryBreakdown& m = s.memory;
  text += fmt::format(
      "memory (rank 0)                weights {}, gradients {}, optimizer state {}, "
      "activations {}, workspace {}; peak RSS {}\n",
      format_bytes(m.weights), format_bytes(m.gradients), format_bytes(m.optimizer_state),
      format_bytes(m.activations), format_bytes(m.workspace), format_bytes(m.peak_rss));
  std::fputs(text.c_str(), out);
  std::fflush(out);
}

ProgressBar::ProgressBar(int epoch, int epochs, std::size_t steps, bool enabled)
    : epoch_(epoch), epochs_(epochs), steps_(steps), enabled_(enabled && steps > 0),
      tty_(isatty(STDERR_FILENO) == 1) {}

void ProgressBar::update(std::size_t done, double loss, double samples_per_s) {
  if (!enabled_) return;
  const int quarter = static_cast<int>(4 * done / steps_);
  const double now = now_seconds();
  if (tty_ ? (now - last_draw_ < 0.1 && done != steps_) : quarter == last_quarter_) return;
  last_quarter_ = quarter;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / steps_);
  const std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
  std::fprintf(stderr, "%sepoch %d/%d [%s] %3zu%% %zu/%zu loss %.4f %.0f samples/s%s",
               tty_ ? "\r" : "", epoch_, epochs_, bar.c_str(), 100 * done / steps_, done,
               steps_, loss, samples_per_s, tty_ ? "" : "\n");
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (enabled_ && tty_) std::fputc('\n', stderr);
}

}  // namespace train_example
