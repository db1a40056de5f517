#include "collectives/algorithms/device_route.h"

#include <fmt/format.h>

namespace hoop::collectives {
namespace {

/// hoop's own way for a call on more than one rank: CUDA IPC where every rank shares this host,
/// a device algorithm exists and the call is not small, else host copies.
DeviceRoute hoop_route(const RouteFacts& f, const RouteCall& call) {
  if (call.kind && !call.host_only && f.one_host && f.ipc && f.store &&
      call.bytes >= f.ipc_min_bytes)
    return DeviceRoute::kTransport;
  return DeviceRoute::kStaged;
}

/// Why an explicit HOOP_GPU_BACKEND=nccl cannot run this job; empty when it can.
std::string nccl_refusal(const RouteFacts& f) {
  if (!f.nccl)
    return "this hoop has no NCCL for this device (built without NCCL, or the device is "
           "HOOP_FAKE_DEVICE's)";
  if (f.ranks == 1) return "";
  if (!f.store)
    return "NCCL meets through the rendezvous store, and this job has none (set "
           "HOOP_RENDEZVOUS_ADDR/PORT, or use hoop)";
  if (f.ranks_per_gpu > 1)
    return fmt::format(
        "{}, and NCCL takes one rank per GPU (use hoop or auto, which run hoop's "
        "algorithms over CUDA IPC there)",
        f.shared_gpu);
  return "";
}

}  // namespace

Result<GpuBackend> parse_gpu_backend(std::string_view name) {
  if (name == "auto") return GpuBackend::kAuto;
  if (name == "nccl") return GpuBackend::kNccl;
  if (name == "hoop") return GpuBackend::kHoop;
  if (name == "staging") return GpuBackend::kStaging;
  return invalid_argument(
      fmt::format("HOOP_GPU_BACKEND='{}' is not one of auto, nccl, hoop, staging", name));
}

std::string_view route_name(DeviceRoute route) {
  switch (route) {
    case DeviceRoute::kLocal:
      return "local";
    case DeviceRoute::kBackend:
      return "nccl";
    case DeviceRoute::kTransport:
      return "cuda-ipc";
    case DeviceRoute::kStaged:
      return "staged";
  }
  return "unknown";
}

bool reduces(Collective kind) {
  return kind == Collective::kAllreduce || kind == Collective::kReduceScatter ||
         kind == Collective::kReduceScatterv || kind == Collective::kReduce;
}

bool nccl_moves(const RouteCall& call) {
  if (!call.kind) return false;
  switch (*call.kind) {
    case Collective::kAllreduce:
    case Collective::kReduceScatter:
      // NCCL has no 16-bit integer type to combine; the other collectives move i16 as halves.
      return call.dtype != DataType::kI16 && call.op != ReduceOp::kAdasum && !call.host_only;
    case Collective::kBroadcast:
    case Collective::kAllgather:
    case Collective::kAlltoall:
      return !call.host_only;
    default:
      return false;
  }
}

Result<DeviceRoute> choose_device_route(const RouteFacts& f, const RouteCall& call) {
  if (f.asked == GpuBackend::kNccl) {
    const std::string refusal = nccl_refusal(f);
    if (!refusal.empty()) return invalid_argument("HOOP_GPU_BACKEND=nccl: " + refusal);
  }
  const bool nccl_can =
      f.nccl && nccl_moves(call) && (f.ranks == 1 || (f.store && f.ranks_per_gpu == 1));
  // Asked for NCCL, a call it has goes there even on one rank, where it costs a set-up.
  if (f.asked == GpuBackend::kNccl && nccl_can) return DeviceRoute::kBackend;
  // One rank: the result is the input, whichever backend was asked for.
  if (f.ranks == 1)
    return call.host_only || !call.kind ? DeviceRoute::kStaged : DeviceRoute::kLocal;
  switch (f.asked) {
    case GpuBackend::kStaging:
      return DeviceRoute::kStaged;
    case GpuBackend::kAuto:
      if (nccl_can) return DeviceRoute::kBackend;
      return hoop_route(f, call);
    case GpuBackend::kNccl:  // what NCCL lacks goes hoop's way
    case GpuBackend::kHoop:
      return hoop_route(f, call);
  }
  return DeviceRoute::kStaged;
}

std::string sharing_warning(const RouteFacts& f) {
  if (f.ranks_per_gpu <= 1 || f.mps) return "";
  return fmt::format(
      "{} without MPS: their kernels and copies take turns on the GPU. Start the MPS daemon "
      "(nvidia-cuda-mps-control -d) before the job so that they run side by side",
      f.shared_gpu);
}

}  // namespace hoop::collectives
