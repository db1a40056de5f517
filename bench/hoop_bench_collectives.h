// The nccl-tests loop for hoop's broadcast, allgather, reduce_scatter and alltoall: timed and
// checked exactly like the shared allreduce loop (bench/common/allreduce_bench.h), so that
// every table hoop-bench prints reads the same way.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "bench/common/bench_table.h"
#include "bench/hoop_bench_peer.h"

namespace hoop::bench {

/// Runs every (dtype[, op], size) of `options` for `collective` (not kAllreduce, which
/// run_allreduce_bench covers); rank 0 prints the table to `out` and writes the JSON report.
/// Returns the number of wrong elements over all ranks and cases.
Result<std::int64_t> run_collective_bench(const BenchOptions& options, HoopPeer& peer,
                                          Collective collective, const std::string& program,
                                          std::FILE* out);

}  // namespace hoop::bench
