#include "collectives/algorithms/cost_model.h"

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/allreduce_table.h"
#include "collectives/patterns/tree.h"
#include "core/config.h"

namespace hoop::collectives {

Result<CostParams> cost_params_from_env() {
  CostParams p;
  HOOP_ASSIGN_OR_RETURN(double alpha_us, config::get_number("HOOP_ALPHA_US"));
  HOOP_ASSIGN_OR_RETURN(double beta_ns, config::get_number("HOOP_BETA_NS_PER_BYTE"));
  HOOP_ASSIGN_OR_RETURN(double gamma_ns, config::get_number("HOOP_GAMMA_NS_PER_BYTE"));
  p.alpha_s = alpha_us * 1e-6;
  p.beta_s_per_byte = beta_ns * 1e-9;
  p.gamma_s_per_byte = gamma_ns * 1e-9;
  return p;
}

double predict_allreduce_seconds(Algorithm algorithm, int size, std::size_t bytes,
                                 const CostParams& params) {
  if (size <= 1) return 0.0;
  const double n = size;
  const double big_n = static_cast<double>(bytes);
  int log_p = 0;
  while ((2 << log_p) <= size) ++log_p;
  const double p = static_cast<double>(1 << log_p);
  const double f = (1 << log_p) == size ? 0.0 : 1.0;
  const double a = params.alpha_s;
  const double b = params.beta_s_per_byte;
  const double g = params.gamma_s_per_byte;
  switch (algorithm) {
    case Algorithm::kRing: {
      // Only one slice's reduction per step is not hidden behind the next slice's transfer.
      const double chunk = big_n / n;
      const double exposed =
          std::min(chunk, static_cast<double>(ring_slice_bytes(static_cast<std::size_t>(chunk))));
      return 2 * (n - 1) * a + 2 * (n - 1) / n * big_n * b + (n - 1) * exposed * g;
    }
    case Algorithm::kRecursiveDoubling:
      return (log_p + 2 * f) * (a + big_n * b) + (log_p + f) * big_n * g;
    case Algorithm::kRabenseifner:
      return (2 * log_p + 2 * f) * a + (2 * (p - 1) / p + 2 * f) * big_n * b +
             ((p - 1) / p + f) * big_n * g;
    case Algorithm::kTree: {
      const double half = big_n / 2;
      const double slices = std::max(1.0, std::ceil(half / static_cast<double>(kTreeSliceBytes)));
      const double s = half / slices;
      const double height = std::ceil(std::log2(n));
      // The busiest rank's links (each carries one slice per steady step) and children (one
      // reduction each per step), over both trees.
      const patterns::DoubleBinaryTree trees(size);
      int links = 0;
      int children = 0;
      for (int r = 0; r < size; ++r) {
        int l = 0;
        int c = 0;
        for (int t = 0; t < patterns::DoubleBinaryTree::kTrees; ++t) {
          const patterns::TreeLinks tl = trees.links(r, t);
          c += tl.num_children();
          l += tl.num_children() + (tl.parent >= 0 ? 1 : 0);
        }
        links = std::max(links, l);
        children = std::max(children, c);
      }
      return (slices + 2 * height) * (a + links * s * b + children * s * g);
    }
    default:
      return 1e300;  // not an allreduce algorithm the model knows
  }
}

namespace {

// The ring's reduce-scatter (or, without gamma, its allgather): half of its allreduce.
double ring_half_seconds(int size, std::size_t bytes, const CostParams& params) {
  return predict_allreduce_seconds(Algorithm::kRing, size, bytes, params) / 2;
}

}  // namespace

double predict_hierarchical_seconds(int hosts, int ranks_per_host, std::size_t bytes,
                                    const CostParams& intra, const CostParams& inter) {
  const int l = std::max(ranks_per_host, 1);
  CostParams gather = intra;
  gather.gamma_s_per_byte = 0;
  CostParams link = inter;
  link.hierarchical = false;  // one rank per host in the cross-host group
  link.beta_s_per_byte *= l;  // the host's l chunks cross its one link at once
  const std::size_t chunk = (bytes + static_cast<std::size_t>(l) - 1) / static_cast<std::size_t>(l);
  const Algorithm across = choose_allreduce(hosts, chunk, link);
  return ring_half_seconds(l, bytes, intra) +
         predict_allreduce_seconds(across, hosts, chunk, link) +
         ring_half_seconds(l, bytes, gather);
}

Algorithm choose_allreduce(int size, std::size_t bytes, const CostParams& params) {
  if (params.hierarchical && bytes >= kHierarchicalBytes) return Algorithm::kHierarchical;
  if (size == 2 && bytes <= kTwoRankExchangeBytes) return Algorithm::kRecursiveDoubling;
  if (params.crowded && size > 2 && bytes >= kCrowdedTreeBytes) return Algorithm::kTree;
  // The first candidate wins ties (recursive doubling before the others at equal cost).
  Algorithm best = Algorithm::kRecursiveDoubling;
  double best_t = predict_allreduce_seconds(best, size, bytes, params);
  for (const AllreduceEntry& e : allreduce_algorithms()) {
    if (!e.cost_model_candidate) continue;
    const double t = predict_allreduce_seconds(e.id, size, bytes, params);
    if (t < best_t) {
      best = e.id;
      best_t = t;
    }
  }
  return best;
}

}  // namespace hoop::collectives

namespace hoop {

namespace {

collectives::CostParams params_of(const CostModel& m) {
  collectives::CostParams p;
  static_cast<CostModel&>(p) = m;
  return p;
}

}  // namespace

Result<CostModel> cost_model_from_env() {
  HOOP_ASSIGN_OR_RETURN(collectives::CostParams p, collectives::cost_params_from_env());
  return static_cast<CostModel>(p);
}

double predict_allreduce_seconds(Algorithm algorithm, int size, std::size_t bytes,
                                 const CostModel& model) {
  return collectives::predict_allreduce_seconds(algorithm, size, bytes, params_of(model));
}

double predict_hierarchical_allreduce_seconds(int hosts, int ranks_per_host, std::size_t bytes,
                                              const CostModel& intra, const CostModel& inter) {
  return collectives::predict_hierarchical_seconds(hosts, ranks_per_host, bytes, params_of(intra),
                                                   params_of(inter));
}

Algorithm predicted_allreduce_choice(int size, std::size_t bytes, const CostModel& model,
                                     bool hierarchical) {
  collectives::CostParams p = params_of(model);
  p.hierarchical = hierarchical;
  return collectives::choose_allreduce(size, bytes, p);
}

}  // namespace hoop
