// The alpha-beta(-gamma) cost model that picks an allreduce algorithm per call.
//
//   alpha: latency of one message (seconds), beta: transfer time per byte, gamma: reduction
//   time per byte. With n ranks, p the largest power of two <= n, N the buffer bytes and
//   f = 1 when n is not a power of two (the fold: one whole-buffer step in, one out):
//
//   ring:               2(n-1) alpha + 2(n-1)/n N beta + (n-1) min(N/n, slice) gamma
//   recursive doubling: (log2 p + 2f) alpha + (log2 p + 2f) N beta + (log2 p + f) N gamma
//   rabenseifner:       (2 log2 p + 2f) alpha + (2(p-1)/p + 2f) N beta
//                       + ((p-1)/p + f) N gamma
//   tree:               (S + 2H) (alpha + L s beta + C s gamma),
//                       H = ceil(log2 n) (the deeper tree's depth), S = ceil(N/2 / kTreeSlice)
//                       L, C = the busiest rank's tree links and children over both trees,
//                       slices per tree of s = N / (2S) bytes
//
// The ring is pipelined (slices of ring_slice_bytes), so its reductions overlap the transfers and
// only about one slice's reduction per step is exposed. Recursive doubling and Rabenseifner
// reduce each exchange slice by slice too, but a step's reduction must finish before the next
// step sends its result, so the model charges their gamma in full (an overestimate for a single
// step: see "Two ranks" below). Without gamma Rabenseifner would beat the ring at every size on
// powers of two, which the pipelined ring does not bear out.
//
// The double binary tree runs a lockstep pipeline of S + 2H steps (fill up to the root, drain
// down to the deepest leaf). In a steady step a rank sends one slice on each of its tree links
// and reduces one slice per child between its waits, so gamma is not hidden. On the default
// constants the model never prefers it.
//
// Crowded hosts: where some host runs more ranks than it has cores, alpha and beta stop
// describing the run: a step finishes only when every rank of it has been scheduled, and the
// ring's 2(n-1) dependent steps each wait for that. Measured (docs/BENCHMARKS.md, 4 ranks on
// 2 cores), the tree's fewer, larger exchanges make it the fastest of all algorithms and peers
// from 512 KiB up (0.54-0.72x Open MPI's time) while the ring is 1.1-1.3x behind. So on a
// crowded job (CostParams::crowded, agreed by all ranks when the communicator is made)
// choose_allreduce takes the tree from kCrowdedTreeBytes up, with three or more ranks.
//
// Two ranks: recursive doubling is one exchange of the whole buffer, reduced slice by slice as
// it arrives (Context::exchange_reduce), so its reduction hides behind the transfer much like
// the ring's, and it has half the ring's steps. Measured on loopback (7 interleaved runs,
// us): 256 KiB 240 vs the ring's 277, 512 KiB 313 vs 524, 1 MiB 491 vs 638, but 2 MiB 1696
// vs 1314, where reducing the whole buffer (the ring reduces half) outweighs the saved step.
// The model's full gamma for recursive doubling predicts the ring from 64 KiB, so with two
// ranks choose_allreduce takes recursive doubling up to kTwoRankExchangeBytes.
//
// Hosts: on ranks spread evenly over two or more hosts (CostParams::hierarchical, set when the
// communicator is made from the host layout), choose_allreduce takes the hierarchical allreduce
// from kHierarchicalBytes up. Its host links carry 2(H-1)/H of the buffer against 2(n-1)/n for
// any flat ring, and its intra-host phases run over shared memory, several times faster than
// the links; below the threshold the latency of its three phases outweighs that, and the flat
// algorithms (over the routed shm+tcp transport) are chosen as before.
//
// Defaults: alpha measured on loopback TCP on the 2-core development VM with
// `hooprun -np 2 build/tests/comm_check pingpong` (half the round trip of a 1-byte message
// with the transport's polling wait, 10 us); beta is the per-direction throughput with both
// directions loaded, as every step of these algorithms has them (bin/tcp_bound: about 1 GB/s,
// 1.0 ns/byte; one-way transfers alone reach 0.57 ns/byte); gamma is an estimate of the f32-sum
// kernel's throughput (about 5 GB/s) with the cache misses of freshly received data (the kernel
// alone runs at 0.03-0.12 ns/byte in bench_reduce). Override with HOOP_ALPHA_US,
// HOOP_BETA_NS_PER_BYTE and HOOP_GAMMA_NS_PER_BYTE.
#pragma once

#include <cstddef>

#include "hoop/communicator.h"

namespace hoop::collectives {

/// The constants of the model (hoop::CostModel's alpha, beta, gamma: HOOP_ALPHA_US,
/// HOOP_BETA_NS_PER_BYTE, HOOP_GAMMA_NS_PER_BYTE) and what the job's shape adds to them.
struct CostParams : CostModel {
  /// Some host of the job runs more ranks than it has cores (see the note above).
  bool crowded = false;
  /// The ranks span hosts in a shape the hierarchical allreduce takes (see the note above).
  bool hierarchical = false;
};

/// From this many bytes a job with a hierarchy takes the hierarchical allreduce.
inline constexpr std::size_t kHierarchicalBytes = std::size_t{64} << 10;

/// Up to this many bytes a two-rank allreduce takes recursive doubling.
inline constexpr std::size_t kTwoRankExchangeBytes = std::size_t{1} << 20;
/// From this many bytes a crowded job's allreduce takes the tree.
inline constexpr std::size_t kCrowdedTreeBytes = std::size_t{512} << 10;

/// The defaults overridden by HOOP_ALPHA_US, HOOP_BETA_NS_PER_BYTE, HOOP_GAMMA_NS_PER_BYTE;
/// invalid_argument naming a malformed variable.
Result<CostParams> cost_params_from_env();

/// Predicted seconds of one allreduce of `bytes` bytes over `size` ranks with `algorithm`
/// (kRing, kRecursiveDoubling, kRabenseifner or kTree).
double predict_allreduce_seconds(Algorithm algorithm, int size, std::size_t bytes,
                                 const CostParams& params);

/// Predicted seconds of the hierarchical allreduce of `bytes` bytes over `hosts` hosts of
/// `ranks_per_host` ranks each: a ring reduce-scatter inside each host (`intra`), the allreduce of
/// each local rank's chunk across the hosts with the algorithm choose_allreduce picks for it, the
/// host's ranks sharing its link (`inter` with beta scaled by ranks_per_host), and a ring
/// allgather inside each host. The segment pipeline is not modelled (an upper bound).
double predict_hierarchical_seconds(int hosts, int ranks_per_host, std::size_t bytes,
                                    const CostParams& intra, const CostParams& inter);

/// The allreduce algorithm with the smallest predicted time (ties: the earlier of recursive
/// doubling, Rabenseifner, ring, tree); with two ranks, recursive doubling up to
/// kTwoRankExchangeBytes; on a crowded job of 3+ ranks, the tree from kCrowdedTreeBytes up; on a
/// job with a hierarchy, the hierarchical allreduce from kHierarchicalBytes up.
Algorithm choose_allreduce(int size, std::size_t bytes, const CostParams& params);

}  // namespace hoop::collectives
