// Hardware discovery with hwloc: counts of packages, NUMA nodes, cores and hardware threads,
// this process's CPU binding, and the PCI GPUs and network devices with their NUMA nodes.
#include <fmt/format.h>
#include <hwloc.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "topology/topology.h"

namespace hoop::topology {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;
using BitmapPtr = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

Status hwloc_failed(std::string_view call, int rc) {
  return internal_error(fmt::format("hwloc: {} failed (returned {}, errno {}: {})", call, rc, errno,
                                    std::strerror(errno)));
}

Result<int> count_of(hwloc_topology_t topo, hwloc_obj_type_t type, std::string_view what) {
  const int n = hwloc_get_nbobjs_by_type(topo, type);
  // -1 means the type spans several depths, which hwloc 2 only does for I/O and memory types.
  if (n < 0) return hwloc_failed(fmt::format("hwloc_get_nbobjs_by_type({})", what), n);
  return n;
}

const char* device_kind(const hwloc_obj* osdev) {
  switch (osdev->attr->osdev.type) {
    case HWLOC_OBJ_OSDEV_GPU:
    case HWLOC_OBJ_OSDEV_COPROC:
      return "gpu";
    case HWLOC_OBJ_OSDEV_NETWORK:
    case HWLOC_OBJ_OSDEV_OPENFABRICS:
      return "nic";
    default:
      return nullptr;
  }
}

std::string pci_bus_id(const hwloc_obj* osdev) {
  for (const hwloc_obj* o = osdev->parent; o != nullptr; o = o->parent) {
    if (o->type != HWLOC_OBJ_PCI_DEVICE) continue;
    const auto& p = o->attr->pcidev;
    return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", p.domain, p.bus, p.dev, p.func);
  }
  return "";
}

// The OS index of the one NUMA node next to the device's CPU-side ancestor; -1 when that
// ancestor spans several nodes (the device is equally far from them) or none.
int closest_numa_node(hwloc_topology_t topo, hwloc_obj* osdev) {
  const hwloc_obj* ancestor = hwloc_get_non_io_ancestor_obj(topo, osdev);
  if (ancestor == nullptr || ancestor->nodeset == nullptr) return -1;
  if (hwloc_bitmap_weight(ancestor->nodeset) != 1) return -1;
  return hwloc_bitmap_first(ancestor->nodeset);
}

Result<int> usable_pus(hwloc_topology_t topo) {
  BitmapPtr set(hwloc_bitmap_alloc());
  if (!set) return internal_error("hwloc: hwloc_bitmap_alloc failed");
  const int rc = hwloc_get_cpubind(topo, set.get(), HWLOC_CPUBIND_PROCESS);
  if (rc != 0) return hwloc_failed("hwloc_get_cpubind(HWLOC_CPUBIND_PROCESS)", rc);
  // The binding may name CPUs that are offline or outside this cgroup; count only real PUs.
  hwloc_bitmap_and(set.get(), set.get(), hwloc_topology_get_topology_cpuset(topo));
  return hwloc_bitmap_weight(set.get());
}

}  // namespace

Result<HostHardware> discover_hardware() {
  hwloc_topology_t raw = nullptr;
  if (int rc = hwloc_topology_init(&raw); rc != 0) return hwloc_failed("hwloc_topology_init", rc);
  TopologyPtr topo(raw);
  if (int rc = hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT); rc != 0)
    return hwloc_failed("hwloc_topology_set_io_types_filter", rc);
  // The linux component reads the PCI devices from sysfs by itself; the pci plugin would read
  // them again through libpciaccess, which leaves allocations behind when hwloc unloads it
  // (LeakSanitizer reports them from an unknown module).
  if (int rc = hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
      rc != 0)
    return hwloc_failed("hwloc_topology_set_components", rc);
  if (int rc = hwloc_topology_load(raw); rc != 0) return hwloc_failed("hwloc_topology_load", rc);

  HostHardware hw;
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0)
    return internal_error(fmt::format("gethostname failed: {}", std::strerror(errno)));
  hw.hostname = name;
  HOOP_ASSIGN_OR_RETURN(hw.packages, count_of(raw, HWLOC_OBJ_PACKAGE, "package"));
  HOOP_ASSIGN_OR_RETURN(hw.numa_nodes, count_of(raw, HWLOC_OBJ_NUMANODE, "NUMA node"));
  HOOP_ASSIGN_OR_RETURN(hw.cores, count_of(raw, HWLOC_OBJ_CORE, "core"));
  HOOP_ASSIGN_OR_RETURN(hw.pus, count_of(raw, HWLOC_OBJ_PU, "PU"));
  HOOP_ASSIGN_OR_RETURN(hw.usable_pus, usable_pus(raw));

  // One PCI function can carry several OS devices (a GPU's cuda0, nvml0, card0 and renderD128;
  // a NIC's ens1f0 and mlx5_0); they become one entry whose name joins theirs with '/'.
  std::map<std::pair<std::string, std::string>, std::size_t> by_bus;  // (kind, bus id) -> index
  for (hwloc_obj* o = hwloc_get_next_osdev(raw, nullptr); o != nullptr;
       o = hwloc_get_next_osdev(raw, o)) {
    const char* kind = device_kind(o);
    if (kind == nullptr || o->name == nullptr) continue;
    PciDevice dev{kind, o->name, pci_bus_id(o), closest_numa_node(raw, o)};
    if (!dev.bus_id.empty()) {
      auto [it, inserted] = by_bus.try_emplace({dev.kind, dev.bus_id}, hw.devices.size());
      if (!inserted) {
        hw.devices[it->second].name += "/" + dev.name;
        continue;
      }
    }
    hw.devices.push_back(std::move(dev));
  }
  hw.rdma = rdma_device_present();
  return hw;
}

}  // namespace hoop::topology
