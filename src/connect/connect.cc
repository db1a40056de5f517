#include "connect/connect.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "topology/routed_transport.h"

namespace hoop::connect {
namespace {

std::string prefix_or_default(const std::string& key_prefix) {
  return key_prefix.empty() ? std::string("hoop") : key_prefix;
}

/// Whether every host of the job has an RDMA device, where an auto rule asks for it; the
/// answer comes from every rank, so that both ends of each pair choose alike.
Result<bool> rdma_everywhere(const BootstrapInfo& info, Store& store,
                             const topology::Layout& layout, const std::string& choice,
                             const std::string& key_prefix) {
  if (choice != "auto" || layout.hosts() < 2) return false;
  const auto entries = transports::registered_transports();
  const bool wanted = std::any_of(entries.begin(), entries.end(), [](const auto* e) {
    return e->built && e->auto_takes != nullptr && e->auto_wants_rdma;
  });
  if (!wanted) return false;
  HOOP_ASSIGN_OR_RETURN(std::vector<std::string> flags,
                        topology::exchange(store, info.rank, info.size,
                                           prefix_or_default(key_prefix) + "/rdma",
                                           topology::rdma_device_present() ? "1" : "0",
                                           info.start_timeout));
  return std::all_of(flags.begin(), flags.end(), [](const std::string& f) { return f == "1"; });
}

/// Every rank's host id: through the store, or over the forced store-less transport.
Result<std::vector<std::string>> host_ids(const BootstrapInfo& info, Store* store,
                                          const std::string& choice,
                                          const std::string& key_prefix) {
  HOOP_ASSIGN_OR_RETURN(std::string mine, topology::local_host_id());
  if (store != nullptr)
    return topology::exchange(*store, info.rank, info.size,
                              prefix_or_default(key_prefix) + "/hosts", mine, info.start_timeout);
  const transports::TransportEntry* e = transports::find_transport(choice);
  if (e == nullptr || e->gather_without_store == nullptr)
    return invalid_argument(fmt::format("HOOP_TRANSPORT={}: a job without a rendezvous store "
                                        "cannot learn where its ranks run",
                                        choice));
  return e->gather_without_store(info, mine);
}

}  // namespace

Result<const transports::TransportEntry*> transport_for(const std::string& choice,
                                                        const transports::PairFacts& pair,
                                                        const BootstrapInfo* info) {
  if (choice == "auto") {
    for (const transports::TransportEntry* e : transports::registered_transports())
      if (e->built && e->auto_takes != nullptr && e->auto_takes(pair)) return e;
    return internal_error("HOOP_TRANSPORT=auto: no transport takes this pair");
  }
  const transports::TransportEntry* e = transports::find_transport(choice);
  if (e == nullptr || e->device_memory)
    return invalid_argument(fmt::format("HOOP_TRANSPORT: unknown transport '{}' (have: auto, {})",
                                        choice, transports::transport_names()));
  if (!e->built)
    return invalid_argument(fmt::format("HOOP_TRANSPORT={}: this hoop was built without it ({}; "
                                        "use auto or tcp)",
                                        choice, e->not_built));
  if (e->refuses != nullptr) {
    const std::string why = e->refuses(info, pair);
    if (!why.empty()) return invalid_argument(fmt::format("HOOP_TRANSPORT={}: {}", choice, why));
  }
  return e;
}

topology::PairTransportRule pair_rule(const std::string& choice) {
  return [choice](bool same_host, bool rdma, int hosts) -> Result<std::string> {
    transports::PairFacts pair;
    pair.same_host = same_host;
    pair.rdma_everywhere = rdma;
    pair.hosts = hosts;
    HOOP_ASSIGN_OR_RETURN(const transports::TransportEntry* e, transport_for(choice, pair));
    return std::string(e->name);
  };
}

Status check_choice(const std::string& choice, const BootstrapInfo& info) {
  if (choice == "auto") return Status::success();
  transports::PairFacts job;  // one host: the host count is known only after the exchange
  job.same_host = true;
  return transport_for(choice, job, &info).status();
}

bool needs_store(const std::string& choice) {
  const transports::TransportEntry* e = transports::find_transport(choice);
  return e == nullptr || e->needs_store;
}

Result<Connection> connect_job(const BootstrapInfo& info, Store* store, const std::string& choice,
                               const std::string& key_prefix) {
  HOOP_ASSIGN_OR_RETURN(std::vector<std::string> ids, host_ids(info, store, choice, key_prefix));
  Connection c;
  c.layout = topology::group_by_host(ids);
  transports::PairFacts pair;
  pair.hosts = c.layout.hosts();
  if (store != nullptr) {
    HOOP_ASSIGN_OR_RETURN(pair.rdma_everywhere,
                          rdma_everywhere(info, *store, c.layout, choice, key_prefix));
  }
  // The peers of each transport; route[r]: the part serving rank r.
  std::map<const transports::TransportEntry*, std::vector<int>> groups;
  for (int r = 0; r < info.size; ++r) {
    if (r == info.rank) continue;
    pair.same_host = c.layout.same_host(info.rank, r);
    HOOP_ASSIGN_OR_RETURN(const transports::TransportEntry* e, transport_for(choice, pair, &info));
    groups[e].push_back(r);
  }
  std::vector<std::unique_ptr<Transport>> parts;
  std::vector<int> route(static_cast<std::size_t>(info.size), 0);
  // In the registry's order on every rank: a connect waits for its group's peers, so ranks
  // that took their transports in different orders could wait for each other forever.
  for (const transports::TransportEntry* e : transports::registered_transports()) {
    if (!groups.contains(e)) continue;
    if (e->needs_store && store == nullptr)
      return invalid_argument(fmt::format("HOOP_TRANSPORT={}: it meets through the rendezvous "
                                          "store, and this job has none",
                                          e->name));
    transports::ConnectSpec spec;
    spec.info = &info;
    spec.store = store;
    spec.peers = groups[e];
    spec.key_prefix = key_prefix;
    HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t, e->connect(spec));
    for (int r : spec.peers) route[static_cast<std::size_t>(r)] = static_cast<int>(parts.size());
    parts.push_back(std::move(t));
  }
  if (parts.size() == 1) {
    c.transport = std::move(parts.front());
  } else {
    HOOP_ASSIGN_OR_RETURN(c.transport,
                          topology::RoutedTransport::create(std::move(parts), std::move(route)));
  }
  return c;
}

}  // namespace hoop::connect
