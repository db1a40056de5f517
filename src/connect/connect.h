// Connecting a rank to the rest of its job, between the transports and the collectives: where
// every rank runs (host ids through the store, or over a store-less transport's own means),
// then for each pair of ranks the transport HOOP_TRANSPORT gives it by the registry's rules
// (transports/registry.h), each group of peers connected by its transport and the parts routed
// per peer. The collectives see one Transport; topology reports facts, not transport names.
#pragma once

#include <memory>
#include <string>

#include "hoop/rendezvous.h"
#include "hoop/transport.h"
#include "topology/topology.h"
#include "transports/registry.h"

namespace hoop::connect {

/// The registry's entry for a pair of ranks under `choice` ("auto" or a transport's name):
/// under auto, the first built entry, by auto_order, whose rule takes the pair. invalid_argument
/// naming HOOP_TRANSPORT for an unknown name or one this build or job cannot use.
Result<const transports::TransportEntry*> transport_for(const std::string& choice,
                                                        const transports::PairFacts& pair,
                                                        const BootstrapInfo* info = nullptr);

/// transport_for as topology::summary asks for it: the name of the pair's transport.
topology::PairTransportRule pair_rule(const std::string& choice);

/// Checks `choice` before anything connects: a known name, built, and (for a forced one) not
/// refused by the transport for this job (`info`; the host count is checked at connect time).
Status check_choice(const std::string& choice, const BootstrapInfo& info);

/// Whether `choice` can run without a rendezvous store (a forced transport that needs none).
bool needs_store(const std::string& choice);

/// A connected rank.
struct Connection {
  std::unique_ptr<Transport> transport;
  topology::Layout layout;
};

/// Connects rank info.rank (of info.size > 1) to every other rank under `choice`, with store
/// keys under `key_prefix` (empty: "hoop"). `store` may be null only when `choice` names a
/// transport that needs none. Every rank calls it at the same point.
Result<Connection> connect_job(const BootstrapInfo& info, Store* store, const std::string& choice,
                               const std::string& key_prefix);

}  // namespace hoop::connect
