// Which way a collective on device buffers runs: one pure function of facts, so that every rank
// comes to the same answer for the same call, and a CPU test walks the whole table.
//
// The facts are the job's (HOOP_GPU_BACKEND, ranks, store, one host, ranks per GPU, NCCL, CUDA
// IPC, MPS), gathered once per communicator at its first device call and the same on every
// rank; the call's are its collective, dtype and op. The routes:
//   - local: a one-rank job; the result is the input, so the call is one device copy (or
//     nothing, in place);
//   - backend: NCCL runs it on the device;
//   - transport: hoop's algorithms run on the device buffers over transports/cuda (CUDA IPC),
//     reducing with the device kernels; a call smaller than HOOP_CUDA_IPC_MIN_BYTES is staged
//     instead, where two copies and the host's one-step shared slots beat a device copy, an
//     event and a host signal per peer and step;
//   - staged: the buffers are copied to pinned host memory, the host collective runs over the
//     communicator's own transport, and the output is copied back.
// HOOP_GPU_BACKEND asks for one (device_path.h says what each value promises); `auto` takes the
// fastest that moves the call: NCCL where it has the call and every rank has a GPU of its own,
// else CUDA IPC on one host, else staging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hoop/communicator.h"

namespace hoop::collectives {

/// HOOP_GPU_BACKEND's values.
enum class GpuBackend : std::uint8_t { kAuto, kNccl, kHoop, kStaging };

/// The value named `name` (auto, nccl, hoop, staging); invalid_argument naming the variable.
Result<GpuBackend> parse_gpu_backend(std::string_view name);

/// How one communicator runs a device call.
enum class DeviceRoute : std::uint8_t { kLocal, kBackend, kTransport, kStaged };

/// "local", "nccl", "cuda-ipc", "staged".
std::string_view route_name(DeviceRoute route);

/// What the route depends on beyond the call; the same on every rank of a communicator.
struct RouteFacts {
  GpuBackend asked = GpuBackend::kAuto;
  int ranks = 1;
  bool store = false;             // a rendezvous store, which NCCL and CUDA IPC meet through
  bool one_host = false;          // every rank on this host
  int ranks_per_gpu = 1;          // most ranks of the job on one device (0: unknown, no store)
  std::string shared_gpu;         // when ranks_per_gpu > 1: which ranks share which device
  bool nccl = false;              // NCCL built into libhoop, and the device is a real one
  bool ipc = false;               // transports/cuda usable (a device, real or fake)
  bool mps = false;               // the MPS daemon serves every rank
  std::size_t ipc_min_bytes = 0;  // smaller calls are staged on one host (HOOP_CUDA_IPC_MIN_BYTES)
};

/// One call, as far as the route cares: a collective, or (no kind) a point-to-point call.
/// `host_only`: no device algorithm exists for it (Adasum; point-to-point calls, whose header is
/// host memory), so it goes through host copies, or is a device copy on one rank.
struct RouteCall {
  std::optional<Collective> kind;
  DataType dtype = DataType::kF32;
  ReduceOp op = ReduceOp::kSum;
  bool host_only = false;
  /// The call's size as every rank sees it alike (a block, or the whole buffer); unknown where
  /// ranks differ (alltoallv), which counts as large.
  std::size_t bytes = kUnknownBytes;
  static constexpr std::size_t kUnknownBytes = SIZE_MAX;
};

/// The RouteCall of collective `kind` of `bytes` (as RouteCall::bytes) of `dtype` with `op`.
inline RouteCall route_call_of(Collective kind, DataType dtype, std::size_t bytes,
                               ReduceOp op = ReduceOp::kSum) {
  return RouteCall{.kind = kind, .dtype = dtype, .op = op, .bytes = bytes};
}

/// Whether `kind` combines the ranks' values (its op matters).
bool reduces(Collective kind);

/// Whether NCCL has `call`: its collective (allreduce, broadcast, allgather, reduce_scatter,
/// alltoall), its dtype (no 16-bit integers where values are combined; moved as bytes elsewhere)
/// and its op (no Adasum).
bool nccl_moves(const RouteCall& call);

/// The route of `call` under `facts`; invalid_argument, naming the variable and what to set
/// instead, where an explicit HOOP_GPU_BACKEND=nccl cannot run the job at all.
Result<DeviceRoute> choose_device_route(const RouteFacts& facts, const RouteCall& call);

/// The warning a job gets once when ranks share a GPU without MPS (their kernels then take
/// turns on the GPU); empty otherwise.
std::string sharing_warning(const RouteFacts& facts);

}  // namespace hoop::collectives
