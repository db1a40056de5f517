#include "tests/comm/comm_rooted.h"

#include <fmt/format.h>

#include "tests/fuzz/fuzz_case.h"
#include "tests/fuzz/fuzz_runner.h"

namespace hoop::comm_check {

Result<std::uint64_t> check_rooted(Communicator& comm, const std::vector<std::size_t>& counts,
                                   const std::vector<DataType>& dtypes,
                                   const std::vector<ReduceOp>& ops,
                                   std::vector<std::string>& problems) {
  constexpr fuzz::Placement kPlacements[] = {fuzz::Placement::kSeparate, fuzz::Placement::kAliased,
                                             fuzz::Placement::kNullInput};
  const int n = comm.size();
  fuzz::CaseRunner runner(comm);
  std::uint64_t index = 0;
  auto run = [&](fuzz::Case c) -> Status {
    c.seed = 31;
    c.index = index;
    c.data_key = 0x2545f4914f6cdd1dull * (++index);
    c.input_offset = static_cast<int>(index % 7);
    c.output_offset = static_cast<int>(index % 5);
    std::vector<std::string> found;
    HOOP_RETURN_IF_ERROR(runner.run(c, found));
    for (const std::string& f : found)
      problems.push_back(fmt::format("rank {}: {}: {}", comm.rank(), fuzz::describe(c), f));
    return Status::success();
  };
  for (std::size_t count : counts) {
    for (DataType dt : dtypes) {
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const fuzz::Case c{.collective = Collective::kReduce,
                           .dtype = dt,
                           .op = ops[k],
                           .count = count,
                           .placement = kPlacements[k % 3],
                           .root = static_cast<int>(k % static_cast<std::size_t>(n))};
        HOOP_RETURN_IF_ERROR(run(c));
      }
      for (std::size_t p = 0; p < 3; ++p) {
        const int root = static_cast<int>((p + 1) % static_cast<std::size_t>(n));
        std::vector<std::size_t> uneven;  // rank r: count + r, the last rank none
        for (int r = 0; r < n; ++r) uneven.push_back(r == n - 1 ? 0 : count + r);
        for (Collective kind : {Collective::kGather, Collective::kScatter}) {
          HOOP_RETURN_IF_ERROR(run({.collective = kind,
                                    .dtype = dt,
                                    .count = count,
                                    .placement = kPlacements[p],
                                    .root = root}));
        }
        for (Collective kind : {Collective::kGatherv, Collective::kScatterv}) {
          HOOP_RETURN_IF_ERROR(run({.collective = kind,
                                    .dtype = dt,
                                    .counts = uneven,
                                    .placement = kPlacements[p],
                                    .root = root}));
        }
      }
    }
  }
  return index;
}

}  // namespace hoop::comm_check
