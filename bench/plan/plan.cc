#include "plan.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace hoop::plan {
namespace {

// Fills throughput, speedup, efficiency from the step time.
Prediction finish(std::string strategy, int n, const Workload& w, double step, double comm,
                  std::string limit) {
  Prediction p;
  p.strategy = std::move(strategy);
  p.workers = n;
  p.step_s = step;
  p.comm_s = comm;
  p.throughput = step > 0 ? n * w.batch / step : 0;
  const double one = single_worker_throughput(w);
  p.speedup = one > 0 ? p.throughput / one : 0;
  p.efficiency = p.speedup / n;
  p.limit = std::move(limit);
  return p;
}

// "compute" when compute and update take most of the step, else `comm_part`.
std::string limit_of(const Workload& w, double comm, const std::string& comm_part) {
  return comm > w.compute_s + w.update_s ? comm_part : "compute";
}

// The allreduce of every gradient, in fusion buffers, with `time(bytes)` per buffer.
template <typename PerBuffer>
double fused(const Workload& w, PerBuffer time) {
  const std::size_t cap = std::max<std::size_t>(w.fusion_bytes, 1);
  double total = 0;
  for (std::size_t left = w.gradient_bytes; left > 0; left -= std::min(left, cap))
    total += time(std::min(left, cap));
  return total;
}

// Whether the latency or the bandwidth term of `model` weighs more for messages of `bytes`.
std::string latency_or_bandwidth(const CostModel& model, double messages, double bytes) {
  return messages * model.alpha_s > bytes * model.beta_s_per_byte ? "latency" : "bandwidth";
}

}  // namespace

double single_worker_throughput(const Workload& w) {
  const double t = w.compute_s + w.update_s;
  return t > 0 ? w.batch / t : 0;
}

std::vector<Prediction> predict(const Workload& w, const Fabric& f, int workers) {
  const int n = std::max(workers, 1);
  const double g = static_cast<double>(w.gradient_bytes);
  const CostModel& l = f.link;
  const double base = w.compute_s + w.update_s;
  std::vector<Prediction> out;

  // ps: n pushes in, then n pulls out, through the server's link; it sums the n pushes.
  const double ps_comm = 2 * n * (l.alpha_s + g * l.beta_s_per_byte) + n * g * l.gamma_s_per_byte;
  out.push_back(finish("ps", n, w, base + ps_comm, ps_comm, limit_of(w, ps_comm, "server link")));

  // ps-async: the worker's own cycle, or its share of the server's updates.
  const double cycle = w.compute_s + 2 * (l.alpha_s + g * l.beta_s_per_byte);
  const double server = l.alpha_s + g * l.beta_s_per_byte + w.update_s;
  const double async_step = std::max(cycle, n * server);
  out.push_back(
      finish("ps-async", n, w, async_step, async_step - w.compute_s,
             n * server > cycle ? "server link" : limit_of(w, cycle - w.compute_s, "link")));

  // kvstore: n - 1 shard messages each way per phase; the host's workers share its link.
  const double share = (n - 1.0) / n;
  const double kv_comm =
      2 * ((n - 1) * l.alpha_s + share * g * f.ranks_per_host * l.beta_s_per_byte) +
      share * g * l.gamma_s_per_byte;
  out.push_back(finish("kvstore", n, w, w.compute_s + w.update_s / n + kv_comm, kv_comm,
                       limit_of(w, kv_comm, latency_or_bandwidth(l, 2 * (n - 1), 2 * share * g))));

  // allreduce, by algorithm, through libhoop's cost model.
  const int hosts = n / std::max(f.ranks_per_host, 1);
  const bool hierarchical = f.ranks_per_host > 1 && hosts >= 2 && n % f.ranks_per_host == 0;
  std::vector<std::pair<std::string, double>> algos;
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner,
                      Algorithm::kTree}) {
    algos.emplace_back(std::string(algorithm_name(a)), fused(w, [&](std::size_t bytes) {
                         return predict_allreduce_seconds(a, n, bytes, l);
                       }));
  }
  if (hierarchical) {
    algos.emplace_back("hierarchical", fused(w, [&](std::size_t bytes) {
                         return predict_hierarchical_allreduce_seconds(hosts, f.ranks_per_host,
                                                                       bytes, f.intra, l);
                       }));
  }
  // auto: per buffer, what the library would run.
  algos.emplace_back("auto", fused(w, [&](std::size_t bytes) {
                       const Algorithm a = predicted_allreduce_choice(n, bytes, l, hierarchical);
                       if (a == Algorithm::kHierarchical)
                         return predict_hierarchical_allreduce_seconds(hosts, f.ranks_per_host,
                                                                       bytes, f.intra, l);
                       return predict_allreduce_seconds(a, n, bytes, l);
                     }));
  for (const auto& [name, comm] : algos) {
    out.push_back(
        finish("allreduce " + name, n, w, base + comm, comm, limit_of(w, comm, "allreduce")));
  }
  return out;
}

double server_saturation_workers(const Workload& w, const Fabric& f) {
  const double g = static_cast<double>(w.gradient_bytes);
  const double cycle = w.compute_s + 2 * (f.link.alpha_s + g * f.link.beta_s_per_byte);
  const double server = f.link.alpha_s + g * f.link.beta_s_per_byte + w.update_s;
  return server > 0 ? cycle / server : INFINITY;
}

double server_ceiling(const Workload& w, const Fabric& f) {
  const double g = static_cast<double>(w.gradient_bytes);
  const double server = f.link.alpha_s + g * f.link.beta_s_per_byte + w.update_s;
  return server > 0 ? w.batch / server : INFINITY;
}

}  // namespace hoop::plan
