// Where the ranks of a job run: hosts, their hardware (hwloc), the grouping of ranks into hosts
// and the ring order that crosses hosts the fewest times. Topology reports facts (same host,
// RDMA present); which transport serves a pair is the transport registry's business
// (transports/registry.h, src/connect).
//
// A host is what shares memory: ranks whose host ids are equal can use the shm transport. The
// id is the kernel's boot id plus the inode of the network namespace, so that ranks in two
// network namespaces of one machine (the netns test bed, containers) count as two hosts;
// HOOP_HOST_ID overrides it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/host_id.h"
#include "hoop/core.h"
#include "hoop/rendezvous.h"

namespace hoop::topology {

/// This process's host id (core/host_id.h).
using hoop::local_host_id;

/// One PCI device of interest (a GPU or a network interface).
struct PciDevice {
  std::string kind;    // "gpu" or "nic"
  std::string name;    // OS names on one PCI function, joined by '/' ("eth0", "ens1f0/mlx5_0")
  std::string bus_id;  // "0000:3b:00.0", empty when unknown
  int numa_node = -1;  // closest NUMA node, -1 when unknown
};

/// What hwloc reports of one host.
struct HostHardware {
  std::string hostname;
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;         // hardware threads
  int usable_pus = 0;  // hardware threads this process may run on (its affinity)
  std::vector<PciDevice> devices;
  bool rdma = false;  // an RDMA device is present (rdma_device_present), so "auto" may take ucx
};

/// Reads this host's hardware with hwloc (PCI devices included); internal_error naming hwloc's
/// failure otherwise.
Result<HostHardware> discover_hardware();

/// Encodes HostHardware for the store as a line-based text form (see hardware_text.cc).
std::string encode_hardware(const HostHardware& hw);
/// Decodes encode_hardware's text; invalid_argument naming the line for anything malformed.
Result<HostHardware> decode_hardware(std::string_view text);

/// Ascending ranks as comma-separated ranges: {0, 1, 2, 5, 7, 8} -> "0-2,5,7-8".
std::string rank_ranges(const std::vector<int>& ranks);

/// The ranks of a job grouped into hosts. Hosts are numbered in the order of their lowest rank.
struct Layout {
  std::vector<int> host_of_rank;             // rank -> host index
  std::vector<std::vector<int>> host_ranks;  // host index -> its ranks, ascending
  std::vector<std::string> host_ids;         // host index -> id

  int size() const { return static_cast<int>(host_of_rank.size()); }
  int hosts() const { return static_cast<int>(host_ranks.size()); }
  bool same_host(int a, int b) const { return host_of_rank[a] == host_of_rank[b]; }
  /// Index of `rank` among its host's ranks, and the number of ranks on its host.
  int local_rank(int rank) const;
  int local_size(int rank) const;
  /// Index of `rank`'s host, and the number of hosts (Horovod's cross rank and size).
  int cross_rank(int rank) const { return host_of_rank[rank]; }
  int cross_size() const { return hosts(); }
  /// Whether every host runs the same number of ranks.
  bool uniform() const;
};

/// Groups ranks by their host ids (ids[r] is rank r's).
Layout group_by_host(const std::vector<std::string>& ids);

/// Every rank publishes `value` under "<key_prefix>/<rank>" and reads every other rank's;
/// returns the values in rank order. timeout_error naming the missing ranks after `timeout`.
Result<std::vector<std::string>> exchange(Store& store, int rank, int size,
                                          const std::string& key_prefix, const std::string& value,
                                          std::chrono::milliseconds timeout);

/// A ring over all ranks that visits each host's ranks consecutively (hosts in index order),
/// so it crosses between hosts exactly hosts() times (0 for one host).
std::vector<int> ring_order(const Layout& layout);

/// Whether this host has an RDMA device (an entry in /sys/class/infiniband).
bool rdma_device_present();

/// The transport HOOP_TRANSPORT gives a pair of ranks, named by the caller (topology knows
/// no transports): from whether they share a host and whether every host has an RDMA device.
using PairTransportRule =
    std::function<Result<std::string>(bool same_host, bool rdma_everywhere, int hosts)>;

/// A printable summary (what `hooprun --topology` shows): each host with its ranks and
/// hardware, the transport between ranks of one host and across hosts (by `rule`, under
/// `transport_choice`), and the ring order. hardware[h] is host h's (as its lowest rank saw
/// it); a host without one prints "unknown".
std::string summary(const Layout& layout, const std::vector<HostHardware>& hardware,
                    const std::string& transport_choice, const PairTransportRule& rule);

}  // namespace hoop::topology
