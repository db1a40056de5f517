// The nccl-tests measurement loop for allreduce, written once against a small interface so that
// hoop-bench and every peer driver time, check and print in exactly the same way.
//
// Per (dtype, op, size): warm-up iterations, a barrier, `iters` timed iterations; the time per
// iteration is the slowest rank's average. Out-of-place runs first, then in-place. With -c 1 the
// inputs are then written again and each variant runs once more to count wrong elements (the
// timed iterations keep reducing their own output, as in nccl-tests, so they cannot be checked).
// Inputs are written and results checked in host memory, copied to and from the peer's buffers
// (BenchBuffer) outside the timed iterations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/bench_buffer.h"
#include "bench/common/bench_table.h"
#include "hoop/core.h"

namespace hoop::bench {

/// One allreduce implementation under test, plus the few helpers the loop needs from it.
class AllreducePeer {
 public:
  virtual ~AllreducePeer() = default;

  /// This process's rank.
  virtual int rank() const = 0;
  /// Number of ranks.
  virtual int size() const = 0;
  /// Names the implementation, algorithm and transport for the table header.
  virtual std::string description() const = 0;
  /// Ok when this implementation reduces `dtype` with `op`; otherwise says why not.
  virtual Status supports(DataType dtype, ReduceOp op) const = 0;
  /// Reduces `count` elements across ranks into `recv`; in place when `send == recv`.
  virtual Status allreduce(const void* send, void* recv, std::size_t count, DataType dtype,
                           ReduceOp op) = 0;
  /// Returns once every rank has called it.
  virtual Status barrier() = 0;
  /// The largest `value` over all ranks, on every rank.
  virtual Result<double> max_over_ranks(double value) = 0;
  /// The sum of `value` over all ranks, on every rank.
  virtual Result<std::int64_t> sum_over_ranks(std::int64_t value) = 0;
  /// Every rank's `line` in rank order, on rank 0 (other ranks may get anything).
  virtual Result<std::vector<std::string>> gather_lines(const std::string& line) = 0;
  /// A buffer of `bytes` bytes in the memory this implementation's collectives run on; host
  /// memory unless an implementation says otherwise (hoop-bench -g: a CUDA device's).
  virtual Result<std::unique_ptr<BenchBuffer>> allocate(std::size_t bytes) {
    return BenchBuffer::host_memory(bytes);
  }
};

/// nccl-tests' timing of one variant: the warm-up calls, a barrier, then `iters` iterations of
/// `agg_iters` calls each. Returns the mean time per call in microseconds, taken over the ranks
/// as options.average says (the slowest rank's by default), on every rank.
Result<double> time_calls(AllreducePeer& peer, const BenchOptions& options,
                          const std::function<Status()>& call);
/// Runs `check` options.check times (each writes fresh inputs, calls once and counts wrong
/// elements over the ranks) and sums the counts.
Result<std::int64_t> checked_calls(const BenchOptions& options,
                                   const std::function<Result<std::int64_t>()>& check);

/// Runs every (dtype, op, size) of `options` over `peer`; rank 0 prints the table to `out` and
/// writes the JSON report. Returns the number of wrong elements over all ranks and cases.
Result<std::int64_t> run_allreduce_bench(const BenchOptions& options, AllreducePeer& peer,
                                         const std::string& program, std::FILE* out);

}  // namespace hoop::bench
