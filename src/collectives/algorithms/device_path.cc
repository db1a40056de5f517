#include "collectives/algorithms/device_path.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "core/config.h"
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

/// Two ranks of the job that use the same device of the same host, which NCCL refuses, named
/// ("ranks 0 and 1 both use cuda:0 of host h"); empty when every rank has a device of its own.
Result<std::string> device_shared(const DeviceSetup& setup, const std::string& prefix, int device,
                                  std::chrono::milliseconds timeout) {
  HOOP_ASSIGN_OR_RETURN(std::string host, topology::local_host_id());
  HOOP_ASSIGN_OR_RETURN(
      std::vector<std::string> all,
      topology::exchange(*setup.store, setup.info.rank, setup.info.size, prefix + "/devices",
                         fmt::format("{}#{}", host, device), timeout));
  std::map<std::string, std::size_t> first;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto [it, fresh] = first.emplace(all[r], r);
    if (fresh) continue;
    const std::size_t hash = all[r].rfind('#');
    return fmt::format("ranks {} and {} both use cuda:{} of host {}", it->second, r,
                       all[r].substr(hash + 1), all[r].substr(0, hash));
  }
  return std::string();
}

/// The route of HOOP_GPU_BACKEND for this job; every rank comes to the same answer.
Result<DeviceRoute> choose_route(const DeviceSetup& setup, const std::string& prefix, int device,
                                 std::chrono::milliseconds timeout) {
  HOOP_ASSIGN_OR_RETURN(std::string choice, config::get_string("HOOP_GPU_BACKEND"));
  const bool have_nccl = find_backend("nccl") != nullptr;
  if (choice == "staging") return DeviceRoute::kStaged;
  if (choice == "nccl") {
    if (!have_nccl)
      return invalid_argument(
          "HOOP_GPU_BACKEND=nccl: this hoop was built without NCCL (use auto or hoop)");
    if (setup.store == nullptr && setup.info.size > 1)
      return invalid_argument(
          "HOOP_GPU_BACKEND=nccl: NCCL meets through the rendezvous store, and this job has none "
          "(set HOOP_RENDEZVOUS_ADDR/PORT, or use hoop)");
    if (setup.store != nullptr && setup.info.size > 1) {
      HOOP_ASSIGN_OR_RETURN(std::string shared, device_shared(setup, prefix, device, timeout));
      if (!shared.empty())
        return invalid_argument(fmt::format(
            "HOOP_GPU_BACKEND=nccl: {}, and NCCL takes one rank per GPU (use hoop or auto, which "
            "run hoop's algorithms over CUDA IPC there)",
            shared));
    }
    return DeviceRoute::kBackend;
  }
  if (setup.store == nullptr || setup.info.size == 1)
    return have_nccl && choice == "auto" ? DeviceRoute::kBackend : DeviceRoute::kStaged;
  // Both remaining choices depend on the whole job, so every rank takes part in the exchange.
  HOOP_ASSIGN_OR_RETURN(std::string shared, device_shared(setup, prefix, device, timeout));
  if (choice == "auto" && have_nccl && shared.empty()) return DeviceRoute::kBackend;
  if (setup.one_host && cuda_ipc() != nullptr) return DeviceRoute::kTransport;
  return DeviceRoute::kStaged;
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
  const std::string prefix =
      (setup.key_prefix.empty() ? std::string("hoop") : setup.key_prefix) + "/gpu";
  HOOP_ASSIGN_OR_RETURN(p->route, choose_route(setup, prefix, device, timeout));
  if (p->route == DeviceRoute::kBackend) {
    DeviceBackendSetup s;
    s.rank = setup.info.rank;
    s.size = setup.info.size;
    s.store = setup.store;
    s.key_prefix = prefix + "/nccl";
    s.device = device;
    s.timeout = timeout;
    HOOP_ASSIGN_OR_RETURN(p->backend, find_backend("nccl")(s));
  }
  if (p->route == DeviceRoute::kTransport) {
    transports::ConnectSpec spec;
    spec.info = &setup.info;
    spec.store = setup.store;
    spec.key_prefix = prefix + "/ipc";
    spec.device = device;
    HOOP_ASSIGN_OR_RETURN(p->transport, cuda_ipc()->connect(spec));
  }
  part = std::move(p);
  return part.get();
}

Status run_staged(DevicePart& part, const void* in, std::size_t in_bytes, void* out,
                  std::size_t out_bytes, Deadline deadline,
                  const std::function<Status(const void* in, void* out)>& host_call) {
  const auto* out_begin = static_cast<const std::byte*>(out);
  const auto* in_at = static_cast<const std::byte*>(in);
  const bool inside = in == nullptr || (in_at >= out_begin && in_at < out_begin + out_bytes);
  std::byte* host_out = part.staging.get(0, out_bytes);
  const void* host_in = nullptr;
  // The output's old contents matter only when the input lives in it.
  if (inside && out_bytes > 0) HOOP_RETURN_IF_ERROR(device::copy(host_out, out, out_bytes));
  if (in != nullptr && inside) {
    host_in = host_out + (in_at - out_begin);
  } else if (in != nullptr) {
    std::byte* staged_in = part.staging.get(1, in_bytes);
    HOOP_RETURN_IF_ERROR(device::copy(staged_in, in, in_bytes));
    host_in = staged_in;
  }
  HOOP_RETURN_IF_ERROR(host_call(host_in, host_out));
  if (out_bytes > 0) HOOP_RETURN_IF_ERROR(device::copy(out, host_out, out_bytes, part.stream.handle()));
  return device::synchronize(part.stream.handle(), deadline);
}

}  // namespace hoop::collectives
