// The printable summary of a job's topology (what hoop-topology and `hooprun --topology` show):
//
//   hosts: 2, ranks: 4 (2 per host)
//   host 0: node1 (id 2b1f.../4026531840)
//     ranks: 0-1
//     cpus: 1 package, 1 NUMA node, 2 cores, 2 PUs (2 usable by rank 0)
//     nics: eth0 (0000:00:03.0, NUMA 0)
//     gpus: none
//   host 1: ...
//   transport: shm within a host, tcp across hosts (HOOP_TRANSPORT=auto)
//   ring: 0-1 | 2-3 (crosses between hosts 2 times)
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "topology/topology.h"

namespace hoop::topology {

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

namespace {

std::string plural(int n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string device_list(const HostHardware& hw, std::string_view kind) {
  std::vector<std::string> items;
  for (const PciDevice& d : hw.devices) {
    if (d.kind != kind) continue;
    std::vector<std::string> where;
    if (!d.bus_id.empty()) where.push_back(d.bus_id);
    if (d.numa_node >= 0) where.push_back(fmt::format("NUMA {}", d.numa_node));
    items.push_back(where.empty() ? d.name
                                  : fmt::format("{} ({})", d.name, fmt::join(where, ", ")));
  }
  return items.empty() ? "none" : fmt::format("{}", fmt::join(items, ", "));
}

std::string ranks_per_host(const Layout& layout) {
  if (layout.hosts() == 0) return "";
  if (layout.uniform()) return fmt::format(" ({} per host)", layout.host_ranks[0].size());
  auto [lo, hi] = std::minmax_element(
      layout.host_ranks.begin(), layout.host_ranks.end(),
      [](const std::vector<int>& a, const std::vector<int>& b) { return a.size() < b.size(); });
  return fmt::format(" ({} to {} per host)", lo->size(), hi->size());
}

void append_host(std::string& out, const Layout& layout, int h, const HostHardware* hw) {
  const std::vector<int>& ranks = layout.host_ranks[h];
  out += fmt::format("host {}: {} (id {})\n", h, hw ? hw->hostname : "?", layout.host_ids[h]);
  out += fmt::format("  ranks: {}", rank_ranges(ranks));
  if (hw && hw->pus > 0 && static_cast<int>(ranks.size()) > hw->pus)
    out += fmt::format(" ({} ranks on {} PUs: oversubscribed)", ranks.size(), hw->pus);
  out += '\n';
  if (hw == nullptr) {
    out += "  hardware: unknown\n";
    return;
  }
  out += fmt::format("  cpus: {}, {}, {}, {} ({} usable by rank {})\n",
                     plural(hw->packages, "package", "packages"),
                     plural(hw->numa_nodes, "NUMA node", "NUMA nodes"),
                     plural(hw->cores, "core", "cores"), plural(hw->pus, "PU", "PUs"),
                     hw->usable_pus, ranks.front());
  out += fmt::format("  nics: {}\n", device_list(*hw, "nic"));
  out += fmt::format("  gpus: {}\n", device_list(*hw, "gpu"));
}

// The transport of the first pair within a host and of the first pair across hosts, which the
// rule makes the same for every such pair. "Every host has an RDMA device" holds when every
// host's hardware is known and has one, as src/connect decides.
std::string transport_line(const Layout& layout, const std::vector<HostHardware>& hardware,
                           const std::string& choice, const PairTransportRule& rule) {
  const bool rdma_everywhere =
      static_cast<int>(hardware.size()) >= layout.hosts() &&
      std::all_of(hardware.begin(), hardware.end(), [](const HostHardware& h) { return h.rdma; });
  const bool pair_within =
      std::any_of(layout.host_ranks.begin(), layout.host_ranks.end(),
                  [](const std::vector<int>& ranks) { return ranks.size() >= 2; });
  const bool pair_across = layout.hosts() >= 2;
  const std::string env = fmt::format("(HOOP_TRANSPORT={})", choice);
  if (!pair_within && !pair_across) return fmt::format("transport: none, one rank {}", env);
  std::string within, across;
  if (pair_within) {
    auto t = rule(true, rdma_everywhere, layout.hosts());
    if (!t.ok()) return fmt::format("transport: error: {}", t.status().message());
    within = *t;
  }
  if (pair_across) {
    auto t = rule(false, rdma_everywhere, layout.hosts());
    if (!t.ok()) return fmt::format("transport: error: {}", t.status().message());
    across = *t;
  }
  if (across.empty()) return fmt::format("transport: {} within the host {}", within, env);
  if (within.empty()) return fmt::format("transport: {} across hosts {}", across, env);
  if (within == across) return fmt::format("transport: {} between every pair {}", within, env);
  return fmt::format("transport: {} within a host, {} across hosts {}", within, across, env);
}

std::string ring_line(const Layout& layout) {
  const std::vector<int> order = ring_order(layout);
  if (order.empty()) return "ring: empty";
  std::vector<std::string> segments;
  std::vector<int> segment;
  int crossings = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    segment.push_back(order[i]);
    const int next = order[(i + 1) % order.size()];
    if (!layout.same_host(order[i], next)) ++crossings;
    if (i + 1 == order.size() || !layout.same_host(order[i], next)) {
      segments.push_back(rank_ranges(segment));
      segment.clear();
    }
  }
  const std::string path = fmt::format("{}", fmt::join(segments, " | "));
  if (crossings == 0) return fmt::format("ring: {} (within one host)", path);
  return fmt::format("ring: {} (crosses between hosts {} times)", path, crossings);
}

}  // namespace

std::string summary(const Layout& layout, const std::vector<HostHardware>& hardware,
                    const std::string& transport_choice, const PairTransportRule& rule) {
  std::string out = fmt::format("hosts: {}, ranks: {}{}\n", layout.hosts(), layout.size(),
                                ranks_per_host(layout));
  for (int h = 0; h < layout.hosts(); ++h) {
    const HostHardware* hw = h < static_cast<int>(hardware.size()) ? &hardware[h] : nullptr;
    append_host(out, layout, h, hw);
  }
  out += transport_line(layout, hardware, transport_choice, rule) + '\n';
  out += ring_line(layout) + '\n';
  return out;
}

}  // namespace hoop::topology
