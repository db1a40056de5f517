// hoop-plan: predicts the step time, throughput and scaling of data-parallel training with
// each strategy and allreduce algorithm at any number of workers, for one of the training
// core's models, from a per-step compute time (measured here unless given) and a fabric.
//
//   build/bin/hoop-plan --model lenet5 --batch-size 64,1024 --workers 1,2,4,25,256,1024
//                       --bandwidth-gbps 1 --latency-us 50
//
// The allreduce times are libhoop's own cost model (the one that picks algorithms); plan.h
// has the formulas of the other strategies.
#include <fmt/format.h>
#include <hoop/communicator.h>
#include <hoop/train.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/common/cli_parse.h"
#include "hoop/version.h"
#include "plan.h"

namespace {

namespace ht = hoop::train;

struct Flags {
  std::string model = "lenet5";
  std::vector<int> batches{64};
  std::vector<int> workers{1, 2, 4, 25, 256, 1024};
  double compute_ms = -1;
  double update_ms = -1;
  double latency_us = -1;
  double bandwidth_gbps = -1;
  double gamma_ns = -1;
  double intra_latency_us = 2;
  double intra_bandwidth_gbps = 40;
  int ranks_per_host = 1;
  double fusion_mib = 64;
  bool csv = false;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The median over 15 steps (after two warm-ups) of forward + loss + backward, and of the SGD
// update, of `model` at `batch` on one thread, as a worker of the study runs them. The batch is
// real Fashion-MNIST (HOOP_DATA_DIR): the data sets the time, and uniformly random pixels made
// LeNet-5's step 1.5-1.8x slower than real images on the development machine.
std::pair<double, double> measure_step(const std::string& name, int batch) {
  ht::set_compute_threads(1);
  ht::Sequential model = ht::make_model(name, 42);
  auto opt = ht::sgd(model.parameters(), 0.01f, 0.9f);
  const ht::Dataset data = ht::load_fashion_mnist(ht::default_data_dir(), true);
  ht::ShardedLoader loader(data, static_cast<std::size_t>(batch), 0, 1, 42);
  loader.start_epoch(0);
  ht::Tensor x;
  std::vector<int> y;
  loader.next(x, y);
  constexpr int kRuns = 15;
  std::vector<double> compute, update;
  ht::Tensor grad;
  for (int s = -2; s < kRuns; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    (void)ht::softmax_cross_entropy(model.forward(x, true), y, &grad);
    model.backward(grad);
    const double c = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    opt->step();
    opt->zero_grad();
    const double u = seconds_since(t0);
    if (s >= 0) {
      compute.push_back(c);
      update.push_back(u);
    }
  }
  std::sort(compute.begin(), compute.end());
  std::sort(update.begin(), update.end());
  return {compute[kRuns / 2], update[kRuns / 2]};
}

std::string cell(const hoop::plan::Prediction& p) {
  return fmt::format("{:.0f} ({:.0f} %)", p.throughput, 100 * p.efficiency);
}

void print_table(const Flags& f, const hoop::plan::Workload& w, const hoop::plan::Fabric& fabric,
                 const std::string& measured) {
  using hoop::plan::Prediction;
  if (f.csv) {
    for (int n : f.workers) {
      for (const Prediction& p : hoop::plan::predict(w, fabric, n))
        std::printf("%d,%d,%s,%.6f,%.6f,%.1f,%.4f,%.4f,%s\n", w.batch, n, p.strategy.c_str(),
                    1e3 * p.step_s, 1e3 * p.comm_s, p.throughput, p.speedup, p.efficiency,
                    p.limit.c_str());
    }
    return;
  }
  std::printf(
      "\nbatch %d per worker: compute %.2f ms + update %.3f ms per step (%s); one worker "
      "%.0f samples/s\npredicted samples/s of all workers (scaling efficiency); step time of "
      "the fastest\n",
      w.batch, 1e3 * w.compute_s, 1e3 * w.update_s, measured.c_str(),
      hoop::plan::single_worker_throughput(w));
  // Two hosts' worth of workers shows every column (hierarchical needs two or more hosts).
  const std::vector<Prediction> all =
      hoop::plan::predict(w, fabric, std::max(f.ranks_per_host * 2, 2));
  std::string line = "| workers |";
  std::string rule = "|---:|";
  for (const Prediction& p : all) {
    line += " " + p.strategy + " |";
    rule += "---:|";
  }
  line += " fastest | step ms | limit |";
  rule += "---|---:|---|";
  std::printf("%s\n%s\n", line.c_str(), rule.c_str());
  for (int n : f.workers) {
    const std::vector<Prediction> row = hoop::plan::predict(w, fabric, n);
    std::string text = fmt::format("| {} |", n);
    // "-" where this many workers have no such column (hierarchical needs whole hosts).
    for (const Prediction& column : all) {
      const auto it = std::find_if(row.begin(), row.end(), [&](const Prediction& p) {
        return p.strategy == column.strategy;
      });
      text += " " + (it == row.end() ? std::string("-") : cell(*it)) + " |";
    }
    const auto best = std::max_element(row.begin(), row.end(), [](const auto& a, const auto& b) {
      return a.throughput < b.throughput;
    });
    text += fmt::format(" {} | {:.2f} | {} |", best->strategy, 1e3 * best->step_s, best->limit);
    std::printf("%s\n", text.c_str());
  }
  std::printf(
      "ps-async: the server's link is busier than a worker from %.1f workers on; it carries at "
      "most %.0f samples/s\n",
      hoop::plan::server_saturation_workers(w, fabric), hoop::plan::server_ceiling(w, fabric));
}

int run(const Flags& f) {
  const hoop::CostModel library = hoop::cost_model_from_env().value();
  hoop::plan::Fabric fabric;
  fabric.link = library;
  if (f.latency_us >= 0) fabric.link.alpha_s = f.latency_us * 1e-6;
  if (f.bandwidth_gbps > 0) fabric.link.beta_s_per_byte = 8.0 / (f.bandwidth_gbps * 1e9);
  if (f.gamma_ns >= 0) fabric.link.gamma_s_per_byte = f.gamma_ns * 1e-9;
  fabric.intra = {f.intra_latency_us * 1e-6, 8.0 / (f.intra_bandwidth_gbps * 1e9),
                  fabric.link.gamma_s_per_byte};
  fabric.ranks_per_host = f.ranks_per_host;

  ht::Sequential model = ht::make_model(f.model, 42);
  std::size_t bytes = 0;
  for (const ht::Parameter* p : model.parameters()) bytes += p->grad.bytes();
  const auto fusion = static_cast<std::size_t>(f.fusion_mib * (1 << 20));
  if (!f.csv) {
    std::printf(
        "hoop-plan: %s, %zu parameters in %zu gradients, %zu bytes of gradients per step "
        "(%zu fusion buffer(s) of up to %.0f MiB)\n"
        "fabric: each host's link %.3f Gbit/s with %.1f us per message, %d rank(s) per host "
        "(inside a host %.1f Gbit/s, %.1f us); reduction %.2f ns/byte\n",
        f.model.c_str(), model.parameter_count(), model.parameters().size(), bytes,
        (bytes + fusion - 1) / std::max<std::size_t>(fusion, 1), f.fusion_mib,
        8.0 / fabric.link.beta_s_per_byte / 1e9, fabric.link.alpha_s * 1e6, f.ranks_per_host,
        8.0 / fabric.intra.beta_s_per_byte / 1e9, fabric.intra.alpha_s * 1e6,
        fabric.link.gamma_s_per_byte * 1e9);
  } else {
    std::printf("batch,workers,strategy,step_ms,comm_ms,samples_per_s,speedup,efficiency,limit\n");
  }
  for (int batch : f.batches) {
    hoop::plan::Workload w;
    w.gradient_bytes = bytes;
    w.batch = batch;
    w.fusion_bytes = fusion;
    std::string measured = "given";
    if (f.compute_ms < 0 || f.update_ms < 0) {
      std::pair<double, double> cu;
      try {
        cu = measure_step(f.model, batch);
      } catch (const hoop::Error& e) {
        throw hoop::Error(e.status().with_context(
            "measuring the compute time of a step (or give --compute-ms and --update-ms)"));
      }
      const auto [c, u] = cu;
      w.compute_s = c;
      w.update_s = u;
      measured = "measured here on one thread, median of 15 steps";
    }
    if (f.compute_ms >= 0) w.compute_s = f.compute_ms * 1e-3;
    if (f.update_ms >= 0) w.update_s = f.update_ms * 1e-3;
    print_table(f, w, fabric, measured);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "Predicts data-parallel training's step time, throughput and speedup by strategy and "
      "allreduce algorithm at any number of workers"};
  app.set_version_flag("--version", hoop::version_line("hoop-plan"));
  app.option_defaults()->always_capture_default();
  const CLI::Validator positive = CLI::Range(1, 1 << 24).description("POSITIVE");
  app.add_option("--model", f.model, "the training core's model: mlp or lenet5")
      ->check(CLI::IsMember({"mlp", "lenet5"}));
  app.add_option("--batch-size", f.batches, "examples per worker per step (comma-separated)")
      ->delimiter(',')
      ->check(positive);
  app.add_option("--workers", f.workers, "worker counts to predict (comma-separated)")
      ->delimiter(',')
      ->check(positive);
  app.add_option("--compute-ms", f.compute_ms,
                 "forward + backward of one step on one worker (default: measured here on "
                 "Fashion-MNIST, HOOP_DATA_DIR)")
      ->check(CLI::Range(0.0, 1e9))
      ->option_text("MS >= 0");
  app.add_option("--update-ms", f.update_ms,
                 "the optimizer's update of one step (default: measured here)")
      ->check(CLI::Range(0.0, 1e9))
      ->option_text("MS >= 0");
  app.add_option("--latency-us", f.latency_us,
                 "per message on a host's link (default: the library's, HOOP_ALPHA_US)")
      ->check(CLI::Range(0.0, 1e9))
      ->option_text("US >= 0");
  app.add_option("--bandwidth-gbps", f.bandwidth_gbps,
                 "a host's link, Gbit/s each way (default: the library's, HOOP_BETA_NS_PER_BYTE)")
      ->check(CLI::Range(1e-6, 1e9))
      ->option_text("GBPS > 0");
  app.add_option("--gamma-ns-per-byte", f.gamma_ns,
                 "reduction cost (default: the library's, HOOP_GAMMA_NS_PER_BYTE)")
      ->check(CLI::Range(0.0, 1e9))
      ->option_text("NS >= 0");
  app.add_option("--ranks-per-host", f.ranks_per_host, "workers sharing a host and its link")
      ->check(positive);
  app.add_option("--intra-latency-us", f.intra_latency_us, "per message inside a host")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--intra-bandwidth-gbps", f.intra_bandwidth_gbps, "between ranks of a host")
      ->check(CLI::Range(1e-6, 1e9));
  app.add_option("--fusion-mib", f.fusion_mib,
                 "the runtime's fusion buffer (HOOP_FUSION_THRESHOLD)")
      ->check(CLI::Range(1e-6, 1e6));
  app.add_flag("--csv", f.csv,
               "one row per batch, workers and strategy: step and communication ms, samples/s, "
               "speedup, efficiency, limit");
  if (const auto code = hoop::bench::parse_command_line(app, argc, argv)) return *code;
  if (f.batches.size() > 1 && f.compute_ms >= 0) {
    std::fprintf(stderr,
                 "hoop-plan: --compute-ms describes one batch size; pass one --batch-size\n");
    return 2;
  }
  try {
    return run(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hoop-plan: %s\n", e.what());
    return 1;
  }
}
