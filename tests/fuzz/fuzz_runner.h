// Runs one fuzz case on this rank: builds its buffers (at the case's odd offsets, guarded),
// calls the collective, and checks the result bit for bit, the guards around every buffer,
// and that an input of its own was left as it was.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "tests/fuzz/fuzz_case.h"

namespace hoop::fuzz {

class CaseRunner {
 public:
  explicit CaseRunner(Communicator& comm) : comm_(comm), n_(comm.size()), me_(comm.rank()) {}

  /// Runs `c` and appends what was wrong with its outcome to `problems`. A non-ok status is
  /// the collective's own error (the transport is aborted then, so no later case can run).
  Status run(const Case& c, std::vector<std::string>& problems);

 private:
  Status allreduce(const Case& c, std::vector<std::string>& problems);
  Status reduce_scatter(const Case& c, std::vector<std::string>& problems);
  Status reduce_scatterv(const Case& c, std::vector<std::string>& problems);
  /// reduce_scatter and reduce_scatterv: rank r's block is counts[r] elements at the sum of
  /// counts[0..r); `call` runs the collective on the case's input and output buffers.
  Status reduce_scatter_blocks(const Case& c, const std::vector<std::size_t>& counts,
                               std::vector<std::string>& problems,
                               const std::function<Status(const void* in, void* out)>& call);
  Status broadcast(const Case& c, std::vector<std::string>& problems);
  Status allgather(const Case& c, std::vector<std::string>& problems);
  Status allgatherv(const Case& c, std::vector<std::string>& problems);
  Status alltoall(const Case& c, std::vector<std::string>& problems);
  Status alltoallv(const Case& c, std::vector<std::string>& problems);
  Status reduce(const Case& c, std::vector<std::string>& problems);
  /// gather, gatherv (blocks of `counts`).
  Status gather(const Case& c, const std::vector<std::size_t>& counts,
                std::vector<std::string>& problems);
  /// scatter, scatterv (blocks of `counts`).
  Status scatter(const Case& c, const std::vector<std::size_t>& counts,
                 std::vector<std::string>& problems);

  Communicator& comm_;
  int n_;
  int me_;
};

}  // namespace hoop::fuzz
