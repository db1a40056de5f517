// Each collective's buffers as the loop of collective_bench.h lays them out, fills and checks
// them: which rank writes which block before a call, which call runs, and how many elements of
// this rank's result then differ from the exact one (bench_data.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "bench/common/bench_buffer.h"
#include "bench/common/collective_bench.h"

namespace hoop::bench {

/// One table row to measure: `count` as the table prints it (collective_bench.h), `bytes` the
/// size column, which algbw divides by.
struct Case {
  BenchCollective collective = BenchCollective::kAllreduce;
  DataType dtype = DataType::kF32;
  std::optional<ReduceOp> op;  // reducing collectives only
  std::size_t count = 0;
  std::size_t bytes = 0;
  int root = 0;
};

/// The two buffers of a case; the variants fill and check their host() copies and hand the
/// collective the matching target() addresses.
struct Buffers {
  BenchBuffer* send = nullptr;
  BenchBuffer* recv = nullptr;
};

/// One variant (out-of-place or in-place) of a case: `prepare` writes fresh inputs and poisons
/// the outputs in host memory, `call` is the collective to run, `wrong` counts this rank's
/// wrong elements in host memory after prepare + call (the loop copies to and from the target
/// around them).
struct Variant {
  std::function<void()> prepare;
  CollectiveCall call;
  std::function<std::int64_t()> wrong;
};

/// The out-of-place or in-place variant of `c` on rank `rank` of `nranks`; nullopt where the
/// collective has no such variant (sendrecv in place: MPI_Sendrecv and hoop::sendrecv both
/// take two buffers).
std::optional<Variant> make_variant(const Case& c, int rank, int nranks, Buffers b, bool in_place);

}  // namespace hoop::bench
