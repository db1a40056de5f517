// The mpi entry of the transport registry: compiled in every build, so that a build without
// MPI still names it and says why it is missing. Never auto's choice: HOOP_TRANSPORT=mpi under
// mpirun, where it needs no rendezvous store.
#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "core/executable.h"
#include "transports/registry.h"
#ifdef HOOP_HAVE_MPI
#include "transports/mpi/mpi_transport.h"
#endif

namespace hoop::mpi {
namespace {

#ifdef HOOP_HAVE_MPI
Result<std::unique_ptr<Transport>> connect_spec(const transports::ConnectSpec& s) {
  HOOP_ASSIGN_OR_RETURN(MpiOptions o, mpi_options_from_env());
  return connect(s.info->rank, s.info->size, o);
}

Result<std::vector<std::string>> gather(const BootstrapInfo& info, const std::string& mine) {
  HOOP_RETURN_IF_ERROR(ensure_world(info.rank, info.size));
  return allgather_strings(mine, info.start_timeout);
}

// Usable when this process is an MPI rank, or mpirun is there to launch one.
transports::Probe probe() {
  const std::string built = fmt::format("compiled in, {}", mpi_library_version());
  std::string why;
  if (mpi_usable(&why)) return {true, built};
  const char* path = std::getenv("PATH");
  if (!find_executable("mpirun", path ? path : "").ok())
    return {false, fmt::format("{}, but mpirun is not on PATH", built)};
  return {true, fmt::format("{}; for jobs mpirun launches with HOOP_TRANSPORT=mpi", built)};
}

std::string refuses(const BootstrapInfo* info, const transports::PairFacts&) {
  if (info == nullptr || info->launcher == "mpirun") return "";
  return fmt::format("it needs a job launched by mpirun (OMPI_COMM_WORLD_RANK set), but this "
                     "rank's layout came from '{}'; use auto, tcp, shm or ucx",
                     info->launcher);
}
#endif

const bool registered = [] {
  transports::TransportEntry e;
  e.name = "mpi";
#ifdef HOOP_HAVE_MPI
  e.built = true;
  e.probe = &probe;
  e.refuses = &refuses;
  e.connect = &connect_spec;
  e.gather_without_store = &gather;
#else
  e.not_built = "not compiled in: Open MPI (libopenmpi-dev) was not found at configure time";
#endif
  e.needs_store = false;
  e.auto_order = 40;
  transports::register_transport(e);
  return true;
}();

}  // namespace
}  // namespace hoop::mpi
