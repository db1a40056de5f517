// Host ids, grouping of ranks into hosts, the store exchange, ring order and transport choice.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/config.h"
#include "topology/topology.h"

namespace hoop::topology {

int Layout::local_rank(int rank) const {
  const auto& ranks = host_ranks[host_of_rank[rank]];
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
}

int Layout::local_size(int rank) const {
  return static_cast<int>(host_ranks[host_of_rank[rank]].size());
}

bool Layout::uniform() const {
  return std::all_of(host_ranks.begin(), host_ranks.end(),
                     [&](const std::vector<int>& r) { return r.size() == host_ranks[0].size(); });
}

Layout group_by_host(const std::vector<std::string>& ids) {
  Layout layout;
  std::map<std::string, int> index;
  layout.host_of_rank.resize(ids.size());
  for (std::size_t r = 0; r < ids.size(); ++r) {
    auto [it, inserted] = index.try_emplace(ids[r], layout.hosts());
    if (inserted) {
      layout.host_ranks.emplace_back();
      layout.host_ids.push_back(ids[r]);
    }
    layout.host_of_rank[r] = it->second;
    layout.host_ranks[it->second].push_back(static_cast<int>(r));
  }
  return layout;
}

Result<std::vector<std::string>> exchange(Store& store, int rank, int size,
                                          const std::string& key_prefix, const std::string& value,
                                          std::chrono::milliseconds timeout) {
  HOOP_RETURN_IF_ERROR(store.set(fmt::format("{}/{}", key_prefix, rank), value));
  std::vector<std::string> keys;
  keys.reserve(size);
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("{}/{}", key_prefix, r));
  HOOP_RETURN_IF_ERROR(store.wait(keys, timeout));
  std::vector<std::string> values(size);
  values[rank] = value;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    HOOP_ASSIGN_OR_RETURN(values[r], store.get(keys[r]));
  }
  return values;
}

std::vector<int> ring_order(const Layout& layout) {
  std::vector<int> order;
  order.reserve(layout.size());
  for (const auto& ranks : layout.host_ranks) order.insert(order.end(), ranks.begin(), ranks.end());
  return order;
}

bool rdma_device_present() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

}  // namespace hoop::topology
