#include "collectives/algorithms/allreduce_table.h"

#include "collectives/algorithms/algorithms.h"

namespace hoop::collectives {

namespace {

Status ring(Context& ctx, std::byte* work, std::size_t count, DataType dtype, ReduceOp op) {
  return ring_allreduce(ctx, work, count, dtype, op);
}

constexpr AllreduceEntry kAllreduce[] = {
    {Algorithm::kRing, "ring", "", &ring, true},
    {Algorithm::kRecursiveDoubling, "recursive_doubling", "rd", &allreduce_recursive_doubling,
     true},
    {Algorithm::kTree, "tree", "", &allreduce_tree, true},
    {Algorithm::kRabenseifner, "rabenseifner", "rab", &allreduce_rabenseifner, true},
    // auto takes it through CostParams::hierarchical, where the job's shape allows it.
    {Algorithm::kHierarchical, "hierarchical", "hier", nullptr, false},
};

}  // namespace

std::span<const AllreduceEntry> allreduce_algorithms() { return kAllreduce; }

const AllreduceEntry* find_allreduce(Algorithm id) {
  for (const AllreduceEntry& e : kAllreduce)
    if (e.id == id) return &e;
  return nullptr;
}

}  // namespace hoop::collectives
