#include "collectives/algorithms/device_path.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

#include "core/config.h"
#include "core/log.h"
#include "topology/topology.h"
#include "transports/registry.h"

namespace hoop::collectives {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, DeviceBackendFactory, std::less<>> factories;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: registrations run at load time
  return *r;
}

DeviceBackendFactory find_backend(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.factories.find(name);
  return it == r.factories.end() ? nullptr : it->second;
}

/// The registry's CUDA IPC transport, where this build has it.
const transports::TransportEntry* cuda_ipc() {
  return transports::transport_built("cuda") ? transports::find_transport("cuda") : nullptr;
}

std::string where(int device) {
  return device == kCpuDevice ? std::string("host memory") : fmt::format("cuda:{}", device);
}

/// The facts of device_route.h for this job; collective when the job has a store and more than
/// one rank (every rank says which device of which host it uses and whether MPS serves it).
Result<RouteFacts> gather_facts(const DeviceSetup& setup, const std::string& prefix, int device,
                                std::chrono::milliseconds timeout) {
  RouteFacts f;
  HOOP_ASSIGN_OR_RETURN(std::string asked, config::get_string("HOOP_GPU_BACKEND"));
  HOOP_ASSIGN_OR_RETURN(f.asked, parse_gpu_backend(asked));
  f.ranks = setup.info.size;
  f.store = setup.store != nullptr;
  f.one_host = setup.one_host || f.ranks == 1;
  f.nccl = find_backend("nccl") != nullptr && !device::fake();
  f.ipc = cuda_ipc() != nullptr && device::device_count() > 0;
  f.mps = device::mps_active();
  HOOP_ASSIGN_OR_RETURN(const std::int64_t min_bytes, config::get_int("HOOP_CUDA_IPC_MIN_BYTES"));
  f.ipc_min_bytes = static_cast<std::size_t>(min_bytes);
  if (f.ranks == 1) return f;
  if (!f.store) {
    f.ranks_per_gpu = 0;
    return f;
  }
  HOOP_ASSIGN_OR_RETURN(std::string host, topology::local_host_id());
  HOOP_ASSIGN_OR_RETURN(
      std::vector<std::string> all,
      topology::exchange(*setup.store, setup.info.rank, setup.info.size, prefix + "/devices",
                         fmt::format("{} {} {} {}", f.mps ? 1 : 0, f.ipc_min_bytes, device, host),
                         timeout));
  std::map<std::string, std::vector<std::size_t>> users;  // "cuda:D of host H" -> ranks
  for (std::size_t r = 0; r < all.size(); ++r) {
    std::istringstream in(all[r]);
    int mps = 0, dev = 0;
    std::size_t theirs = 0;
    std::string on;
    in >> mps >> theirs >> dev >> on;
    f.mps = f.mps && mps == 1;
    // The smallest setting of any rank, so that every rank routes alike even if they differ.
    f.ipc_min_bytes = std::min(f.ipc_min_bytes, theirs);
    users[fmt::format("cuda:{} of host {}", dev, on)].push_back(r);
  }
  f.ranks_per_gpu = 1;
  for (const auto& [gpu, ranks] : users) {
    if (static_cast<int>(ranks.size()) <= f.ranks_per_gpu) continue;
    f.ranks_per_gpu = static_cast<int>(ranks.size());
    f.shared_gpu =
        fmt::format("ranks {} and {}{} use {}", ranks[0], ranks[1],
                    ranks.size() > 2 ? fmt::format(" ({} in all)", ranks.size()) : "", gpu);
  }
  return f;
}

std::string prefix_of(const DeviceSetup& setup) {
  return (setup.key_prefix.empty() ? std::string("hoop") : setup.key_prefix) + "/gpu";
}

/// The chunk of a staged allreduce of `bytes`: a quarter of it, 1 to 16 MiB, whole elements; a
/// chunk's copies cost about a microsecond of set-up each, so small calls go in one.
std::size_t staged_chunk_bytes(std::size_t bytes, std::size_t element) {
  constexpr std::size_t kMin = std::size_t{1} << 20, kMax = std::size_t{16} << 20;
  const std::size_t quarter = std::clamp((bytes + 3) / 4, kMin, kMax);
  return std::max(element, quarter / element * element);
}

}  // namespace

void register_device_backend(std::string_view name, DeviceBackendFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[std::string(name)] = factory;
}

bool device_backend_registered(std::string_view name) { return find_backend(name) != nullptr; }

Result<int> buffers_device(std::initializer_list<NamedBuffer> buffers) {
  if (device::device_count() == 0) return kCpuDevice;
  int found = kCpuDevice;
  std::string_view found_name;
  bool first = true;
  for (const NamedBuffer& b : buffers) {
    if (b.first == nullptr) continue;
    const int d = device::pointer_device(b.first);
    if (!first && d != found)
      return invalid_argument(fmt::format("{} is in {} but {} is in {}; one call's buffers must "
                                          "all be in the same memory",
                                          found_name, where(found), b.second, where(d)));
    found = d;
    found_name = b.second;
    first = false;
  }
  return found;
}

Result<DevicePart*> device_part(std::unique_ptr<DevicePart>& part, const DeviceSetup& setup,
                                int device, std::chrono::milliseconds timeout) {
  if (part != nullptr) {
    if (part->device != device)
      return invalid_argument(fmt::format(
          "buffers on cuda:{}: this communicator runs its device collectives on cuda:{} (one "
          "device per communicator, as with NCCL)",
          device, part->device));
    return part.get();
  }
  auto p = std::make_unique<DevicePart>();
  p->device = device;
  HOOP_RETURN_IF_ERROR(device::set_device(device));
  HOOP_ASSIGN_OR_RETURN(p->stream, device::Stream::create(device));
  HOOP_ASSIGN_OR_RETURN(p->facts, gather_facts(setup, prefix_of(setup), device, timeout));
  if (setup.info.rank == 0) {
    const std::string warning = sharing_warning(p->facts);
    if (!warning.empty()) HOOP_LOG(kWarn, "{}", warning);
  }
  part = std::move(p);
  return part.get();
}

Result<DeviceRoute> route_call(DevicePart& part, const DeviceSetup& setup, const RouteCall& call,
                               std::chrono::milliseconds timeout) {
  HOOP_ASSIGN_OR_RETURN(const DeviceRoute route, choose_device_route(part.facts, call));
  if (route == DeviceRoute::kBackend && part.backend == nullptr) {
    DeviceBackendSetup s;
    s.rank = setup.info.rank;
    s.size = setup.info.size;
    s.store = setup.store;
    s.key_prefix = prefix_of(setup) + "/nccl";
    s.device = part.device;
    s.timeout = timeout;
    HOOP_ASSIGN_OR_RETURN(part.backend, find_backend("nccl")(s));
  }
  if (route == DeviceRoute::kTransport && part.transport == nullptr) {
    transports::ConnectSpec spec;
    spec.info = &setup.info;
    spec.store = setup.store;
    spec.key_prefix = prefix_of(setup) + "/ipc";
    spec.device = part.device;
    HOOP_ASSIGN_OR_RETURN(part.transport, cuda_ipc()->connect(spec));
  }
  return route;
}

Status run_local(DevicePart& part, const void* in, std::size_t in_bytes, void* out,
                 std::size_t out_bytes, Deadline deadline) {
  const std::size_t bytes = std::min(in_bytes, out_bytes);
  if (in == nullptr || in == out || bytes == 0) return Status::success();
  HOOP_RETURN_IF_ERROR(device::copy(out, in, bytes, part.stream.handle()));
  return device::synchronize(part.stream.handle(), deadline);
}

Status run_staged(DevicePart& part, const void* in, std::size_t in_bytes, void* out,
                  std::size_t out_bytes, Deadline deadline,
                  const std::function<Status(const void* in, void* out)>& host_call) {
  const auto* in_at = static_cast<const std::byte*>(in);
  auto* out_at = static_cast<std::byte*>(out);
  void* stream = part.stream.handle();
  // Overlapping buffers (an in-place call: the input inside the output, as an allreduce's, or
  // the output inside the input, as the root's block of an in-place scatter) go as one range,
  // so that each keeps its place in the other; the output's old contents then matter too.
  const bool overlap = in != nullptr && in_at < out_at + out_bytes && out_at < in_at + in_bytes;
  const bool same = in == nullptr || in == out || overlap;
  const std::byte* lo = same && in != nullptr ? std::min<const std::byte*>(in_at, out_at) : out_at;
  const std::byte* hi = same && in != nullptr
                            ? std::max<const std::byte*>(in_at + in_bytes, out_at + out_bytes)
                            : out_at + out_bytes;
  const std::size_t staged_bytes = static_cast<std::size_t>(hi - lo);
  HOOP_RETURN_IF_ERROR(part.staging[0].reserve(staged_bytes));
  std::byte* host = part.staging[0].data();
  std::byte* host_out = host + (out_at - lo);
  const void* host_in = nullptr;
  if (same && staged_bytes > 0) HOOP_RETURN_IF_ERROR(device::copy(host, lo, staged_bytes, stream));
  if (in != nullptr && same) {
    host_in = host + (in_at - lo);
  } else if (in != nullptr) {
    HOOP_RETURN_IF_ERROR(part.staging[1].reserve(in_bytes));
    HOOP_RETURN_IF_ERROR(device::copy(part.staging[1].data(), in, in_bytes, stream));
    host_in = part.staging[1].data();
  }
  HOOP_RETURN_IF_ERROR(device::synchronize(stream, deadline));
  HOOP_RETURN_IF_ERROR(host_call(host_in, host_out));
  if (out_bytes > 0) HOOP_RETURN_IF_ERROR(device::copy(out, host_out, out_bytes, stream));
  return device::synchronize(stream, deadline);
}

Status run_staged_chunked(DevicePart& part, const void* in, void* out, std::size_t bytes,
                          std::size_t element, Deadline deadline,
                          const std::function<Status(const void* in, void* out, std::size_t offset,
                                                     std::size_t length)>& host_call) {
  const std::size_t chunk = staged_chunk_bytes(bytes, element);
  const std::size_t chunks = bytes == 0 ? 0 : (bytes + chunk - 1) / chunk;
  void* stream = part.stream.handle();
  const std::byte* from = static_cast<const std::byte*>(in != nullptr ? in : out);
  auto* to = static_cast<std::byte*>(out);
  HOOP_RETURN_IF_ERROR(part.staging[0].reserve(bytes));
  std::byte* host = part.staging[0].data();
  while (part.chunk_done.size() < chunks) {
    HOOP_ASSIGN_OR_RETURN(device::Event e, device::Event::create(part.device));
    part.chunk_done.push_back(std::move(e));
  }
  // Every chunk's copy to the host is queued at once: the copy engine works through them while
  // the host reduces the ones that have arrived, and their results go back behind them.
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t at = k * chunk, len = std::min(chunk, bytes - at);
    HOOP_RETURN_IF_ERROR(device::copy(host + at, from + at, len, stream));
    HOOP_RETURN_IF_ERROR(part.chunk_done[k].record(stream));
  }
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t at = k * chunk, len = std::min(chunk, bytes - at);
    HOOP_RETURN_IF_ERROR(part.chunk_done[k].wait(deadline));
    HOOP_RETURN_IF_ERROR(host_call(host + at, host + at, at, len));
    HOOP_RETURN_IF_ERROR(device::copy(to + at, host + at, len, stream));
  }
  return device::synchronize(stream, deadline);
}

}  // namespace hoop::collectives
