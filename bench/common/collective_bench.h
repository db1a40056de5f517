// The nccl-tests loop for every collective of the table (bench_table.h), written once against a
// small interface so that hoop-bench and the peer drivers time, check and print alike: the
// allreduce loop of allreduce_bench.h, and the same loop for the others, where a peer runs one
// CollectiveCall at a time.
//
// Per (dtype[, op], size): fresh inputs, warm-up iterations, a barrier, `iters` timed
// iterations (the slowest rank's mean), out-of-place then in-place; with -c 1 each variant then
// runs once more on fresh inputs and its output is compared bit for bit (bench_data.h). The
// size column is nccl-tests': the whole buffer for broadcast, reduce and sendrecv, all ranks'
// blocks for the others (whose count column is one rank's block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "bench/common/allreduce_bench.h"
#include "bench/common/bench_table.h"
#include "hoop/core.h"

namespace hoop::bench {

/// One call as the loop asks a peer to run it. `input` and `output` are nccl-tests' send and
/// receive buffers of this rank, laid out as hoop/communicator.h describes the collective:
///   allreduce, reduce, broadcast, reduce_scatter, alltoall: in place, input == output (for
///     broadcast out of place, the root sends from input and the others receive into output);
///   allgather, gather: in place, input == output + rank * count;
///   scatter: in place, output == input + rank * count;
///   sendrecv: `count` elements of input to rank + 1, from rank - 1 into output; never in place.
/// Buffers only the root reads or writes are still valid pointers on every rank.
struct CollectiveCall {
  BenchCollective collective = BenchCollective::kAllreduce;
  void* input = nullptr;
  void* output = nullptr;
  std::size_t count = 0;  // per rank where the table's count column is per rank
  DataType dtype = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;  // reducing collectives only
  int root = 0;                  // rooted collectives only
  bool in_place = false;
};

/// A peer that runs every collective of the table, not only allreduce.
class CollectivePeer : public AllreducePeer {
 public:
  /// Names the implementation of `collective` (its function, algorithm, transport) for the
  /// table header.
  virtual std::string describe_collective(BenchCollective collective) const = 0;
  /// Runs one call.
  virtual Status run(const CollectiveCall& call) = 0;
};

/// Runs every (dtype[, op], size) of `options` for `collective` over `peer` (allreduce through
/// run_allreduce_bench); rank 0 prints the table to `out` and writes the JSON report. Returns
/// the number of wrong elements over all ranks and cases. sendrecv needs two ranks or more.
Result<std::int64_t> run_collective_bench(const BenchOptions& options, CollectivePeer& peer,
                                          BenchCollective collective, const std::string& program,
                                          std::FILE* out);

}  // namespace hoop::bench
