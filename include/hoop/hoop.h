/// @file
/// hoop's runtime: the Horovod-like API for training loops.
///
/// init() joins the job the launcher described and starts one background thread per process
/// set. Every collective names its tensor; ranks may submit tensors in any order, and the
/// background threads agree on one execution order (rank 0 of each set coordinates), check that
/// every rank asked for the same thing, fuse small tensors into one buffer and run them through
/// a Communicator. Steady-state steps are answered from a response cache: a rank sends only the
/// cache bits of the tensors it has ready.
///
/// Errors: functions that start work throw hoop::Error for bad arguments (null data, a name
/// already in flight on this rank, an unknown process set) and when the runtime has failed.
/// What goes wrong later (ranks that disagree on a tensor, a lost peer, a stall past
/// HOOP_STALL_SHUTDOWN_SECONDS) fails the Handle: wait() throws it, status() returns it. A
/// failure of the job (a lost peer) fails every pending and later handle on every rank with
/// the original cause.
///
/// Thread safety: every function may be called from any thread; one tensor name must not be
/// submitted twice at once on one rank.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hoop/core.h"

namespace hoop {

/// A caller's tensor: dense row-major elements of `dtype` at `data`, in host memory
/// (kCpuDevice) or, in a build with CUDA, in the memory of CUDA device `device`. Ranks may use
/// different devices; they must agree on host or device.
struct Tensor {
  void* data = nullptr;             ///< the first element
  DataType dtype = DataType::kF32;  ///< the element type
  std::vector<std::int64_t> shape;  ///< outermost first; empty: a scalar (one element)
  int device = kCpuDevice;          ///< kCpuDevice, or the CUDA device holding the elements

  /// The number of elements (product of the shape).
  std::size_t count() const;
  /// count() * dtype_size(dtype).
  std::size_t bytes() const;
};

/// A tensor whose storage the runtime allocated (allgather, alltoall, reducescatter results),
/// in the memory the inputs were in: host memory in `storage`, or device memory (cudaMalloc,
/// freed with the last copy of `device_storage`) on CUDA device `device`.
struct OwnedTensor {
  DataType dtype = DataType::kF32;            ///< the element type
  std::vector<std::int64_t> shape;            ///< outermost first; empty: a scalar
  std::vector<std::byte> storage;             ///< the elements when device == kCpuDevice
  int device = kCpuDevice;                    ///< kCpuDevice, or the CUDA device holding them
  std::shared_ptr<std::byte> device_storage;  ///< the elements when device != kCpuDevice

  /// The first element, wherever it is.
  std::byte* data();
  /// A Tensor view of the storage.
  Tensor view();
  /// Copies the elements to `dst`, which holds at least as many bytes: host memory for a host
  /// tensor; host or device memory for a device tensor. Done when it returns; throws
  /// hoop::Error when the device copy fails.
  void copy_to(void* dst) const;
};

namespace detail {
struct HandleState;
}

/// An asynchronous operation. Copies share the operation.
class Handle {
 public:
  /// A handle that refers to no operation (valid() is false).
  Handle() = default;
  /// A handle on the operation `state` tracks (the runtime makes them).
  explicit Handle(std::shared_ptr<detail::HandleState> state) : state_(std::move(state)) {}

  /// Whether this handle refers to an operation.
  bool valid() const { return state_ != nullptr; }
  /// True once the operation has finished, successfully or not. Never blocks.
  bool poll() const;
  /// Blocks until the operation finishes; throws hoop::Error when it failed.
  void wait() const;
  /// Blocks until the operation finishes and returns its outcome.
  Status status() const;
  /// The result of an allgather, alltoall or reducescatter (valid after wait()).
  OwnedTensor& output() const;
  /// Alltoall: the number of first-dimension rows received from each rank (after wait()).
  const std::vector<std::int64_t>& received_splits() const;
  /// join(): the rank (in the process set) that joined last (after wait()).
  int last_joined_rank() const;
  /// Calls `callback` once with the outcome when the operation finishes: at once, on this
  /// thread, when it has finished already; else on the thread that finishes it (hoop's
  /// background thread). For adapters whose framework completes operations by callback
  /// (TensorFlow's asynchronous kernels): the callback must return quickly and must not wait
  /// on a hoop handle. One callback per handle; a second replaces the first.
  void on_done(std::function<void(const Status&)> callback) const;

 private:
  std::shared_ptr<detail::HandleState> state_;
};

/// A subset of the job's ranks with its own coordination and communicator. 0 is the global
/// set of all ranks.
using ProcessSet = int;
/// The set of all the job's ranks.
inline constexpr ProcessSet kGlobalProcessSet = 0;

/// Settings of a reduction.
struct ReduceOptions {
  /// The reduction.
  ReduceOp op = ReduceOp::kAvg;
  /// Multiplies each rank's input before the reduction (float types only when != 1).
  double prescale = 1.0;
  /// Multiplies the result after the reduction (float types only when != 1).
  double postscale = 1.0;
  /// The ranks that take part.
  ProcessSet process_set = kGlobalProcessSet;
};

/// Joins the job described by the environment (hooprun, mpirun, Slurm, HOOP_*), connects the
/// ranks and starts the background thread. Throws hoop::Error naming what is wrong. A second
/// init() without shutdown() is a no-op; init() after shutdown() starts afresh.
void init();
/// Finishes the work in flight on every rank, stops the background threads and closes the
/// connections. Every rank must call it. Idempotent; a no-op before init().
void shutdown();
/// Whether init() has succeeded and shutdown() has not been called since.
bool is_initialized();
/// Whether this build takes CUDA device tensors (compiled with CUDA; a device may still be
/// missing at run time).
bool cuda_built();
/// Whether this build has the NCCL device backend (HOOP_GPU_BACKEND=nccl).
bool nccl_built();
/// The NCCL_VERSION_CODE of the NCCL this build's device backend was compiled against (2.21.5:
/// 22105), or 0 without one; Horovod's nccl_built() returns the same, and scripts compare it
/// with a version.
int nccl_version_code();
/// Whether this build has the MPI transport (HOOP_TRANSPORT=mpi, for jobs mpirun starts).
bool mpi_built();
/// The number of CUDA devices this process can use: 0 without a CUDA build, driver or device.
/// Needs no init(); never fails.
int cuda_device_count();
/// Why cuda_device_count() is 0 ("hoop was built without CUDA", or the CUDA runtime's error),
/// for messages that refuse a device; empty when a device is usable.
std::string cuda_unavailable_reason();

// This rank, the number of ranks, this rank among the ranks of its host, the ranks on its
// host, this host's index and the number of hosts. Throw hoop::Error before init().

/// This rank; throws hoop::Error before init().
int rank();
/// The number of ranks; throws hoop::Error before init().
int size();
/// This rank among the ranks of its host; throws hoop::Error before init().
int local_rank();
/// The number of ranks on this rank's host; throws hoop::Error before init().
int local_size();
/// The index of this rank's host among the hosts; throws hoop::Error before init().
int cross_rank();
/// The number of hosts; throws hoop::Error before init().
int cross_size();

/// Reduces `input` over the ranks of the set into `output` (same dtype and shape; may be the
/// same memory as `input`). Every rank must submit the same name, dtype, shape, op and scales.
Handle allreduce_async(const std::string& name, const Tensor& input, const Tensor& output,
                       const ReduceOptions& options = {});
/// allreduce_async(...).wait().
void allreduce(const std::string& name, const Tensor& input, const Tensor& output,
               const ReduceOptions& options = {});
/// Reduces several tensors as one unit: they are negotiated and fused together. names[i]
/// belongs to inputs[i] and outputs[i]. One handle for the group.
Handle grouped_allreduce_async(const std::vector<std::string>& names,
                               const std::vector<Tensor>& inputs,
                               const std::vector<Tensor>& outputs,
                               const ReduceOptions& options = {});
/// grouped_allreduce_async(...).wait().
void grouped_allreduce(const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                       const std::vector<Tensor>& outputs, const ReduceOptions& options = {});

/// Concatenates every rank's `input` along the first dimension (rank order). The first
/// dimension may differ between ranks; the rest of the shape and the dtype must not.
Handle allgather_async(const std::string& name, const Tensor& input,
                       ProcessSet process_set = kGlobalProcessSet);
/// allgather_async(...) waited for; returns its output.
OwnedTensor allgather(const std::string& name, const Tensor& input,
                      ProcessSet process_set = kGlobalProcessSet);

/// Copies `tensor` on `root` (a rank of the set, numbered within it) into `tensor` on every
/// other rank of the set.
Handle broadcast_async(const std::string& name, const Tensor& tensor, int root,
                       ProcessSet process_set = kGlobalProcessSet);
/// broadcast_async(...).wait().
void broadcast(const std::string& name, const Tensor& tensor, int root,
               ProcessSet process_set = kGlobalProcessSet);

/// Sends splits[j] first-dimension rows of `input` to rank j of the set (in order) and
/// receives the rows every rank sends here, concatenated in rank order. Empty splits: the
/// first dimension divided evenly (it must divide). Output and received splits on the handle.
Handle alltoall_async(const std::string& name, const Tensor& input,
                      const std::vector<std::int64_t>& splits = {},
                      ProcessSet process_set = kGlobalProcessSet);
/// alltoall_async(...) waited for; returns its output.
OwnedTensor alltoall(const std::string& name, const Tensor& input,
                     const std::vector<std::int64_t>& splits = {},
                     ProcessSet process_set = kGlobalProcessSet);

/// Reduces `input` over the set and leaves rank r of the set with its share of the first
/// dimension (rows split as evenly as possible, the first ranks taking one more).
Handle reducescatter_async(const std::string& name, const Tensor& input,
                           const ReduceOptions& options = {});
/// reducescatter_async(...) waited for; returns this rank's share.
OwnedTensor reducescatter(const std::string& name, const Tensor& input,
                          const ReduceOptions& options = {});

/// Returns once every rank of the set has reached its barrier.
void barrier(ProcessSet process_set = kGlobalProcessSet);

/// Declares that this rank has no more tensors for this step: until every rank of the set has
/// joined, allreduces the others submit run with zeros from this rank (kAvg divides by the
/// whole set, as in Horovod); any other collective fails naming the joined ranks.
/// Handle::last_joined_rank() says who joined last.
Handle join_async(ProcessSet process_set = kGlobalProcessSet);
/// join_async(...) waited for; returns the last rank to join.
int join(ProcessSet process_set = kGlobalProcessSet);

/// Starts writing the timeline (a Chrome trace of every tensor's phases) to `path`, as
/// HOOP_TIMELINE does at init: rank 0 writes it, or every rank its own file when `path`
/// contains "%r" (replaced by the rank). A timeline being written is closed first, complete.
/// `mark_cycles`: an instant event at each cycle of the background threads as well. Call it
/// on every rank (HOOP_TIMELINE=DYNAMIC starts none at init, as in Horovod).
void start_timeline(const std::string& path, bool mark_cycles = false);
/// Stops writing the timeline; the file stays a complete trace. Nothing when none is written.
void stop_timeline();

/// Creates a process set of the given global ranks (sorted, distinct). Every rank of the job
/// must call it with the same ranks, in the same order relative to other process-set calls.
ProcessSet add_process_set(const std::vector<int>& ranks);
/// Removes a process set (every rank of the job calls it); its pending work fails.
void remove_process_set(ProcessSet process_set);
/// The global ranks of a set.
std::vector<int> process_set_ranks(ProcessSet process_set);
/// This rank's place in a set (-1: not a member).
int process_set_rank(ProcessSet process_set);

}  // namespace hoop
