// Runs the coordinator's responses on a process set's data communicator: copies tensors into
// and out of the fusion buffer (with their scale factors), calls the collective, and stands in
// zeros for a rank that has joined. Device tensors (a CUDA build) take the same steps on the
// device: the fusion buffer, scratch and results are device memory, copies and scalings are
// queued on the executor's stream, and the Communicator runs the collective on device buffers
// (NCCL, CUDA IPC or staging, as HOOP_GPU_BACKEND says).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/coarse_clock.h"
#include "core/timeline.h"
#include "hoop/communicator.h"
#include "runtime/handle_state.h"
#include "runtime/memory.h"
#include "runtime/message.h"

namespace hoop::runtime {

/// Fused buffers of at least kPipelineMinBytes go through the collective in chunks of
/// kPipelineChunkBytes, with copies into and out of the fusion buffer overlapping it.
inline constexpr std::size_t kPipelineMinBytes = std::size_t{8} << 20;
inline constexpr std::size_t kPipelineChunkBytes = std::size_t{2} << 20;

/// One helper thread that runs one job at a time beside the background thread.
class CopyWorker {
 public:
  CopyWorker() = default;
  CopyWorker(const CopyWorker&) = delete;
  CopyWorker& operator=(const CopyWorker&) = delete;
  ~CopyWorker();
  /// Starts `job` on the helper thread (started on first use); the previous job must be
  /// finished.
  void start(std::function<Status()> job);
  /// Waits for the job started last and returns its status.
  Status finish();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<Status()> job_;
  bool done_ = true;
  bool stop_ = false;
  Status result_;
  std::thread thread_;
};

class Executor {
 public:
  /// Runs over `comm`; `timeline` may be null.
  Executor(Communicator& comm, Timeline& timeline) : comm_(comm), timeline_(timeline) {}

  /// Runs `resp`. entries[i] is this rank's submission of resp.tensors[i], or null where this
  /// rank has joined. Returns what failed (a transport failure fails the whole job).
  Status run(const Response& resp, const std::vector<Entry*>& entries);

 private:
  Status allreduce(const Response& resp, const std::vector<Entry*>& entries);
  /// A carried allreduce (Response::carried): every rank's input is at hand, reduced here into
  /// this rank's output with no collective.
  Status reduce_carried(const Response& resp, Entry* e);
  /// A fused host allreduce without fusion copies (allreduce_list): the ranks read each
  /// other's tensors where they lie.
  Status allreduce_where_they_lie(const Response& resp, const std::vector<Entry*>& entries,
                                  std::size_t total);
  Status allgather(const Response& resp, Entry* e);
  Status broadcast(const Response& resp, Entry* e);
  Status alltoall(const Response& resp, Entry* e);
  Status reducescatter(const Response& resp, Entry* e);
  /// Reduces `buf` over the set with the tensor's op, then postscales. Joined ranks contribute
  /// zeros, and an average divides by the whole set, as in Horovod.
  Status reduce_in_place(const Request& t, void* buf, std::size_t count, const Memory& mem);
  /// The memory of `resp`'s tensors on this rank: host, or the CUDA device of this rank's
  /// tensors (for a rank that joined and has none, the device it used last).
  Result<Memory> memory_for(const Response& resp, const std::vector<Entry*>& entries);
  Deadline deadline() const { return coarse_now() + comm_.timeout(); }
  void begin(const Response& resp, const char* phase);
  void end(const Response& resp);

  Communicator& comm_;
  Timeline& timeline_;
  Algorithm algorithm_ = Algorithm::kAuto;  // the running response's (Response::algorithm)
  Workspace fusion_;  // the persistent fusion buffer
  Workspace scratch_;
  CopyWorker copier_;
  device::Stream stream_;  // on the device of the last device response
  int last_device_ = kCpuDevice;
  std::vector<const std::byte*> carried_;  // reduce_carried()'s, kept for its capacity
};

}  // namespace hoop::runtime
