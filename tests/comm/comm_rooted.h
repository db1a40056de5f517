// The rooted collectives (reduce, gather(v), scatter(v)) and point-to-point calls for
// comm_check, over the real transports: the fuzzer's cases (tests/fuzz), whose inputs make
// every result exact, and messages of the fuzzer's random bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hoop/communicator.h"

namespace hoop::comm_check {

/// Runs reduce and reduce_scatterv (every op in `ops`), gather, gatherv, scatter and scatterv
/// for each count and dtype, roots and placements in turn, checking every result bit for bit.
/// Appends what went wrong to `problems`; returns the number of cases, or the first
/// collective's error.
Result<std::uint64_t> check_rooted(Communicator& comm, const std::vector<std::size_t>& counts,
                                   const std::vector<DataType>& dtypes,
                                   const std::vector<ReduceOp>& ops,
                                   std::vector<std::string>& problems);

/// sendrecv around the ring (to rank + 1, from rank - 1) for each count and dtype, then
/// send/recv along a chain from rank 0; every message checked bit for bit. As check_rooted.
Result<std::uint64_t> check_p2p(Communicator& comm, const std::vector<std::size_t>& counts,
                                const std::vector<DataType>& dtypes,
                                std::vector<std::string>& problems);

/// split (by parity, keys reversed) and dup, with the fuzzer's random cases on each group, then
/// non-blocking calls of every kind in flight together on the communicator and a dup of it,
/// waited for in reverse order; results checked exactly. As check_rooted.
Result<std::uint64_t> check_split_async(Communicator& comm, std::vector<std::string>& problems);

/// check_rooted, check_p2p and check_split_async in turn; the cases they ran.
Result<std::uint64_t> check_more(Communicator& comm, const std::vector<std::size_t>& counts,
                                 const std::vector<DataType>& dtypes,
                                 const std::vector<ReduceOp>& ops,
                                 std::vector<std::string>& problems);

}  // namespace hoop::comm_check
