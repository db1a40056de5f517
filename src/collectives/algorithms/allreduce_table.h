// The allreduce algorithms, in one table: the name and short alias that algorithm_name(),
// parse_algorithm(), HOOP_ALGO and hoop-bench --algo use, the function that runs each, and
// whether the cost model may pick it for HOOP_ALGO=auto. Parsing, validation, dispatch and the
// cost model's candidates all loop over this table, so an algorithm added here is known
// everywhere; a unit test checks that every name it holds is accepted everywhere.
#pragma once

#include <span>
#include <string_view>

#include "collectives/algorithms/context.h"
#include "hoop/communicator.h"

namespace hoop::collectives {

/// Runs one flat allreduce on `work` in place, its input already copied there.
using AllreduceRun = Status (*)(Context& ctx, std::byte* work, std::size_t count,
                                DataType dtype, ReduceOp op);

/// One allreduce algorithm.
struct AllreduceEntry {
  Algorithm id;
  std::string_view name;   // as algorithm_name() prints it
  std::string_view alias;  // a short name parse_algorithm() accepts too; empty: none
  /// Null for the hierarchical algorithm, which needs the job's host groups
  /// (allreduce_hierarchical).
  AllreduceRun run;
  /// Whether the cost model weighs it for HOOP_ALGO=auto.
  bool cost_model_candidate;
};

/// Every allreduce algorithm a caller can name (kAuto is not one: it asks the cost model).
std::span<const AllreduceEntry> allreduce_algorithms();
/// The entry of `id`, or null (kAuto, or a value outside the enum).
const AllreduceEntry* find_allreduce(Algorithm id);

}  // namespace hoop::collectives
