// hoop-plan's model: the step time, throughput and speedup of data-parallel training with each
// strategy (allreduce by algorithm, a central parameter server, synchronous or asynchronous,
// and a sharded key-value store) at any number of workers, from the gradients' size, a
// per-step compute time and a fabric description.
//
// Allreduce costs come from libhoop's own cost model (hoop::predict_allreduce_seconds, the one
// auto uses to pick an algorithm), with the fabric's alpha, beta and gamma; the other
// strategies are priced with the same three constants (G: gradient bytes, n workers, c the
// compute and u the optimizer update of one step):
//
//   ps (sync):   c + u + 2 n (alpha + G beta) + n G gamma
//                every push and every pull crosses the server's one link, one after another
//   ps-async:    each worker cycles in c + 2 (alpha + G beta); the server applies one push in
//                alpha + G beta + u (its link carries G each way per update), so the step a
//                worker sees is max(cycle, n x server time): the link saturates from there
//   kvstore:     c + u / n + 2 ((n-1) alpha + (n-1)/n G L beta) + (n-1)/n G gamma
//                each worker sends and receives n-1 shard messages per phase, and the L
//                workers of a host share its link
//   allreduce:   c + u + the model's time per fused buffer (HOOP_FUSION_THRESHOLD bytes each),
//                flat algorithms with the link's constants, hierarchical with the host's
//
// Nothing overlaps compute in this model: the training core's allreduce overlaps backward only
// with the buffers that are ready early, and the other strategies not at all.
#pragma once

#include <hoop/communicator.h>

#include <cstddef>
#include <string>
#include <vector>

namespace hoop::plan {

/// What one worker's step moves and computes.
struct Workload {
  std::size_t gradient_bytes = 0;  // every gradient of the model, float32
  double compute_s = 0;            // forward, loss and backward of one step on one worker
  double update_s = 0;             // the optimizer's update of every parameter
  int batch = 64;                  // examples per worker per step
  std::size_t fusion_bytes = std::size_t{64} << 20;  // the runtime's fusion buffer
};

/// The machines: every host's link (alpha, beta; gamma is the reduction cost anywhere) and
/// the links between the ranks of one host.
struct Fabric {
  CostModel link;
  CostModel intra;
  int ranks_per_host = 1;
};

/// One strategy at one number of workers.
struct Prediction {
  std::string strategy;  // "ps", "ps-async", "kvstore", "allreduce ring", ...
  int workers = 1;
  double step_s = 0;      // the time one worker takes per step
  double comm_s = 0;      // of which communication (and reduction)
  double throughput = 0;  // samples/s of all workers
  double speedup = 0;     // throughput / one worker's without communication
  double efficiency = 0;  // speedup / workers
  std::string limit;      // what takes the largest share of the step
};

/// Samples/s of one worker with no communication: batch / (compute + update).
double single_worker_throughput(const Workload& w);

/// Every strategy's prediction at `workers` (>= 1): ps, ps-async, kvstore, then allreduce with
/// each algorithm the cost model prices (ring, recursive doubling, Rabenseifner, tree), the
/// hierarchical one where the workers fill two or more hosts evenly, and "allreduce auto":
/// the algorithm the library would pick.
std::vector<Prediction> predict(const Workload& w, const Fabric& f, int workers);

/// The number of workers from which the central server's link is busy longer than a worker
/// computes (ps-async: the server becomes the bottleneck and throughput stops growing).
double server_saturation_workers(const Workload& w, const Fabric& f);

/// The ceiling of the central server's throughput in samples/s: what its link can carry.
double server_ceiling(const Workload& w, const Fabric& f);

}  // namespace hoop::plan
