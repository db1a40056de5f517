// Collectives on CUDA device buffers. Every public collective accepts device pointers (all of
// one call's buffers on one device); how the call then runs is decided once per communicator,
// at its first device collective, by HOOP_GPU_BACKEND:
//   - nccl: a registered device backend (collectives/nccl) runs every collective it has on the
//     device; auto picks it when it is built and no two ranks of the job share a device (NCCL
//     refuses a communicator with one GPU twice);
//   - hoop: in a one-host job of a build with CUDA, hoop's own algorithms run on the device
//     buffers over transports/cuda (CUDA IPC), reducing with the device kernels; otherwise, and
//     for the collectives a backend lacks, the buffers are staged through host memory and the
//     host collective runs over the communicator's own transport;
//   - staging: always the latter (the baseline the other two are measured against).
// The first device collective is therefore itself collective (it sets up NCCL or CUDA IPC
// through the store), which every collective is anyway.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "collectives/algorithms/context.h"
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

/// How one communicator runs its device collectives; see the file comment.
enum class DeviceRoute : std::uint8_t { kBackend, kTransport, kStaged };

/// A communicator's device side, set up by its first device collective.
struct DevicePart {
  DeviceRoute route = DeviceRoute::kStaged;
  int device = kCpuDevice;
  device::Stream stream;
  std::unique_ptr<DeviceBackend> backend;  // kBackend
  std::unique_ptr<Transport> transport;    // kTransport: transports/cuda
  Scratch staging;                         // kStaged: host copies of the buffers
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

/// Runs `host_call` on host copies of a collective's buffers: `in_bytes` at `in` and
/// `out_bytes` at `out` (device memory) are copied to host staging, the call runs on those, and
/// the output is copied back. An input inside the output (an in-place call) stays inside it.
Status run_staged(DevicePart& part, const void* in, std::size_t in_bytes, void* out,
                  std::size_t out_bytes, Deadline deadline,
                  const std::function<Status(const void* in, void* out)>& host_call);

}  // namespace hoop::collectives
