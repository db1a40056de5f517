// Collectives on CUDA device buffers. Every public collective accepts device pointers (all of
// one call's buffers on one device). A communicator's first device call sets up its device side
// (collectively: the ranks exchange which device of which host each uses) and learns the facts
// device_route.h routes every call by; the route is then chosen per call, the same on every
// rank, and what a route needs (NCCL's communicator, the CUDA IPC mesh) is set up by the first
// call that takes it. HOOP_GPU_BACKEND:
//   - nccl: NCCL runs every call it has; what it lacks (i16 reductions, the v-variants, the
//     rooted collectives, Adasum) goes hoop's way; a job NCCL cannot run at all (ranks sharing a
//     GPU, no store, no NCCL in this build) is an error naming why;
//   - hoop: hoop's own algorithms over CUDA IPC in a one-host job, else host copies;
//   - staging: host copies always (the baseline the other two are measured against);
//   - auto: NCCL where it has the call and every rank has a GPU of its own, else hoop's way.
// On one rank every backend but an explicit nccl is a device copy.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collectives/algorithms/context.h"
#include "collectives/algorithms/device_route.h"
#include "device/device.h"
#include "hoop/communicator.h"
#include "hoop/rendezvous.h"

namespace hoop::collectives {

/// A library that runs collectives on device memory by itself (NCCL). Each call queues the
/// collective on `stream` (a cudaStream_t) and returns once it has finished, or fails by
/// `deadline` (after which the backend is aborted and every later call fails).
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  /// Short name for errors and tables ("nccl").
  virtual std::string_view name() const = 0;
  virtual Status allreduce(const AllreduceOptions& o, void* stream, Deadline deadline) = 0;
  virtual Status broadcast(const BroadcastOptions& o, void* stream, Deadline deadline) = 0;
  virtual Status allgather(const AllgatherOptions& o, void* stream, Deadline deadline) = 0;
  virtual Status reduce_scatter(const ReduceScatterOptions& o, void* stream,
                                Deadline deadline) = 0;
  virtual Status alltoall(const AlltoallOptions& o, void* stream, Deadline deadline) = 0;
  /// Ends the backend's communicator after a failure elsewhere; later calls fail with `cause`.
  virtual void abort(const Status& cause) = 0;
};

/// What a device backend is built from: the job, the store its ranks meet through, and the
/// device of this rank.
struct DeviceBackendSetup {
  int rank = 0;
  int size = 1;
  Store* store = nullptr;
  std::string key_prefix;
  int device = 0;
  std::chrono::milliseconds timeout{30000};
};

/// Builds a backend; called collectively by every rank.
using DeviceBackendFactory = Result<std::unique_ptr<DeviceBackend>> (*)(const DeviceBackendSetup&);

/// Makes `factory` the backend named `name` for HOOP_GPU_BACKEND; collectives/nccl registers
/// "nccl" when libhoop is loaded. A second registration of a name replaces the first.
void register_device_backend(std::string_view name, DeviceBackendFactory factory);
/// Whether a backend named `name` is registered.
bool device_backend_registered(std::string_view name);

/// A buffer of one collective call, for error messages: its pointer and its argument name.
using NamedBuffer = std::pair<const void*, std::string_view>;

/// The device all of `buffers` (null ones ignored) are on, or kCpuDevice when they are all host
/// memory; invalid_argument naming two of them when they are on different devices (one on the
/// host included). Costs nothing in a process without a CUDA device.
Result<int> buffers_device(std::initializer_list<NamedBuffer> buffers);

/// A communicator's device side, set up by its first device collective.
struct DevicePart {
  int device = kCpuDevice;
  RouteFacts facts;
  device::Stream stream;
  std::unique_ptr<DeviceBackend> backend;  // NCCL, once a call took it
  std::unique_ptr<Transport> transport;    // transports/cuda, once a call took it
  device::PinnedBuffer staging[2];         // host copies of a staged call's buffers
  std::vector<device::Event> chunk_done;   // the staged allreduce's pipeline
};

/// What a communicator keeps to set up its device side later: the job, the store (owned when
/// Communicator::create connected it), and whether every rank runs on this host.
struct DeviceSetup {
  BootstrapInfo info;
  Store* store = nullptr;
  std::shared_ptr<Store> owned_store;  // shared with the communicators split from this one
  std::string key_prefix;
  bool one_host = false;
};

/// Sets up (first call) and returns the device side of a communicator for buffers on
/// `device`; a device other than the first one's is invalid_argument.
Result<DevicePart*> device_part(std::unique_ptr<DevicePart>& part, const DeviceSetup& setup,
                                int device, std::chrono::milliseconds timeout);

/// The route of `call` on `part`, with what it needs set up (collectively: every rank routes
/// the same call the same way).
Result<DeviceRoute> route_call(DevicePart& part, const DeviceSetup& setup, const RouteCall& call,
                               std::chrono::milliseconds timeout);

/// The local route: a one-rank call's output is its input (`in_bytes` at `in`), copied to `out`
/// on the device unless it is there already.
Status run_local(DevicePart& part, const void* in, std::size_t in_bytes, void* out,
                 std::size_t out_bytes, Deadline deadline);

/// Runs `host_call` on host copies of a collective's buffers: `in_bytes` at `in` and
/// `out_bytes` at `out` (device memory) are copied to pinned host staging, the call runs on
/// those, and the output is copied back. Overlapping buffers (an input inside the output, or
/// the output inside the input) keep their places in each other; a null input stays null.
Status run_staged(DevicePart& part, const void* in, std::size_t in_bytes, void* out,
                  std::size_t out_bytes, Deadline deadline,
                  const std::function<Status(const void* in, void* out)>& host_call);

/// run_staged for an element-wise call (an allreduce) of `bytes` bytes in elements of
/// `element` bytes: the buffer goes in chunks of whole elements, so that one chunk's copies to
/// and from the device overlap the host call on another (an `element` of `bytes`: one chunk).
/// `host_call(in, out, offset, length)` runs on bytes [offset, offset + length) of the input and
/// output.
Status run_staged_chunked(DevicePart& part, const void* in, void* out, std::size_t bytes,
                          std::size_t element, Deadline deadline,
                          const std::function<Status(const void* in, void* out, std::size_t offset,
                                                     std::size_t length)>& host_call);

}  // namespace hoop::collectives
