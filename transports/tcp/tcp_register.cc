// The tcp entry of the transport registry: every pair, and auto's choice where nothing closer
// serves it.
#include "transports/registry.h"
#include "transports/tcp/tcp_transport.h"

namespace hoop::tcp {
namespace {

Result<std::unique_ptr<Transport>> connect_spec(const transports::ConnectSpec& s) {
  HOOP_ASSIGN_OR_RETURN(TcpOptions o, tcp_options_from_env());
  if (!s.key_prefix.empty()) o.key_prefix = s.key_prefix;
  if (s.peers.size() + 1 != static_cast<std::size_t>(s.info->size)) o.peers = s.peers;
  return connect_mesh(*s.store, s.info->rank, s.info->size, s.info->secret, s.info->job_id, o);
}

const bool registered = [] {
  transports::TransportEntry e;
  e.name = "tcp";
  e.built = true;
  e.probe = [] { return transports::Probe{true, "compiled in"}; };
  e.auto_takes = [](const transports::PairFacts&) { return true; };
  e.auto_order = 30;
  e.connect = &connect_spec;
  transports::register_transport(e);
  return true;
}();

}  // namespace
}  // namespace hoop::tcp
