// The ucx entry of the transport registry: compiled in every build, so that a build without
// UCX still names it and says why it is missing. Auto takes it across hosts when every host of
// the job has an RDMA device.
#include <fmt/format.h>

#include <cstdlib>

#include "transports/registry.h"
#ifdef HOOP_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif

namespace hoop::ucx {
namespace {

#ifdef HOOP_HAVE_UCX
Result<std::unique_ptr<Transport>> connect_spec(const transports::ConnectSpec& s) {
  HOOP_ASSIGN_OR_RETURN(UcxOptions o, ucx_options_from_env());
  o.key_prefix = (s.key_prefix.empty() ? std::string("hoop") : s.key_prefix) + "/ucx";
  return connect(*s.store, s.info->rank, s.info->size, s.peers, s.info->job_id, o);
}

// Usable where a UCP worker opens under this environment's UCX_* variables.
transports::Probe probe() {
  const char* tls = std::getenv("UCX_TLS");
  const std::string built =
      fmt::format("compiled in, UCX {}, UCX_TLS={}", ucx_version(), tls ? tls : "(all)");
  std::string why;
  if (ucx_usable(&why)) return {true, built};
  return {false, fmt::format("{}, but {}", built, why)};
}
#endif

const bool registered = [] {
  transports::TransportEntry e;
  e.name = "ucx";
#ifdef HOOP_HAVE_UCX
  e.built = true;
  e.probe = &probe;
  e.auto_takes = [](const transports::PairFacts& p) { return !p.same_host && p.rdma_everywhere; };
  e.auto_wants_rdma = true;
  e.connect = &connect_spec;
#else
  e.not_built = "not compiled in: libucx-dev was not found at configure time";
#endif
  e.auto_order = 20;
  transports::register_transport(e);
  return true;
}();

}  // namespace
}  // namespace hoop::ucx
