// The cases of collective_fuzz: case K of seed S is a pure function of (S, K) and the job's
// shape, so every rank derives the same case without talking to the others, and a failure is
// replayed with --seed S --case K on a job of the same shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hoop/communicator.h"

namespace hoop::fuzz {

/// Every collective, in the order the cases draw them from.
inline constexpr Collective kAllCollectives[] = {
    Collective::kAllreduce, Collective::kBroadcast,     Collective::kAllgather,
    Collective::kAllgatherv, Collective::kReduceScatter, Collective::kAlltoall,
    Collective::kAlltoallv, Collective::kBarrier,       Collective::kReduce,
    Collective::kGather,    Collective::kGatherv,       Collective::kScatter,
    Collective::kScatterv,  Collective::kReduceScatterv};

/// Whether `c` reduces, with Case::op.
inline bool reduces(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kReduceScatter ||
         c == Collective::kReduceScatterv || c == Collective::kReduce;
}
/// Whether `c` takes one count per rank, in Case::counts.
inline bool per_rank_counts(Collective c) {
  return c == Collective::kAllgatherv || c == Collective::kGatherv ||
         c == Collective::kScatterv || c == Collective::kReduceScatterv;
}

/// How a case passes its input: in a buffer of its own, or inside the output (the public API's
/// in-place forms: the input pointer equal to the output's own block, or null).
enum class Placement : std::uint8_t { kSeparate, kAliased, kNullInput };

/// What the job looks like; the cases a job can run depend on it.
struct JobShape {
  int size = 1;
  /// Whether the hierarchical allreduce is valid for this job (hosts of equal rank counts).
  bool hierarchical = false;
  /// Largest buffer one case passes, in bytes (the output of an allgather, the input of a
  /// reduce-scatter or alltoall); counts are cut to fit.
  std::size_t max_bytes = std::size_t{8} << 20;
};

/// One collective call with everything that varies.
struct Case {
  std::uint64_t seed = 0;
  std::uint64_t index = 0;
  /// Derives the case's data; differs between cases.
  std::uint64_t data_key = 0;
  Collective collective = Collective::kBarrier;
  DataType dtype = DataType::kU8;
  ReduceOp op = ReduceOp::kSum;            // allreduce, reduce_scatter, reduce
  Algorithm algorithm = Algorithm::kAuto;  // allreduce
  std::size_t count = 0;                   // per rank (allgather, reduce_scatter) or per pair
  std::vector<std::size_t> counts = {};    // per_rank_counts(): per rank;
                                           // alltoallv: size x size,
                                           // counts[i * size + j] from rank i to rank j
  Placement placement = Placement::kSeparate;
  int root = 0;          // broadcast and the rooted collectives
  int input_offset = 0;  // bytes past a 64-byte boundary
  int output_offset = 0;
  /// Floats of sum, avg, min and max are integers times 2^scale_exp (see fuzz_data.h).
  int scale_exp = 0;
};

/// Case `index` of `seed` for a job of `shape`.
Case make_case(std::uint64_t seed, std::uint64_t index, const JobShape& shape);

/// Everything about the case on one line, as failures print it.
std::string describe(const Case& c);

/// The counts rank `rank` sends to (alltoallv) each rank, and receives from each.
std::vector<std::size_t> send_counts(const Case& c, int size, int rank);
std::vector<std::size_t> recv_counts(const Case& c, int size, int rank);

}  // namespace hoop::fuzz
