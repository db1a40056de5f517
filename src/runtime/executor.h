// Runs the coordinator's responses on a process set's data communicator: copies tensors into
// and out of the fusion buffer (with their scale factors), calls the collective, and stands in
// zeros for a rank that has joined.
#pragma once

#include <cstddef>
#include <vector>

#include "hoop/communicator.h"
#include "runtime/handle_state.h"
#include "runtime/message.h"
#include "runtime/timeline.h"

namespace hoop::runtime {

class Executor {
 public:
  /// Runs over `comm`; fused allreduces use a buffer of at most `fusion_threshold` bytes;
  /// `timeline` may be null.
  Executor(Communicator& comm, Timeline* timeline) : comm_(comm), timeline_(timeline) {}

  /// Runs `resp`. entries[i] is this rank's submission of resp.tensors[i], or null where this
  /// rank has joined. Returns what failed (a transport failure fails the whole job).
  Status run(const Response& resp, const std::vector<Entry*>& entries);

 private:
  Status allreduce(const Response& resp, const std::vector<Entry*>& entries);
  Status allgather(const Response& resp, Entry* e);
  Status broadcast(const Response& resp, Entry* e);
  Status alltoall(const Response& resp, Entry* e);
  Status reducescatter(const Response& resp, Entry* e);
  /// Sums into `buf` and finishes avg (divide by the ranks that submitted) and postscale.
  Status reduce_in_place(const Request& t, void* buf, std::size_t count, int contributors);
  void begin(const Response& resp, const char* phase);
  void end(const Response& resp);

  Communicator& comm_;
  Timeline* timeline_;
  std::vector<std::byte> fusion_;  // the persistent fusion buffer
  std::vector<std::byte> scratch_;
};

}  // namespace hoop::runtime
