// The shm entry of the transport registry: the ranks of one host, auto's choice there.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transports/registry.h"
#include "transports/shm/shm_transport.h"

namespace hoop::shm {
namespace {

Result<std::unique_ptr<Transport>> connect_spec(const transports::ConnectSpec& s) {
  HOOP_ASSIGN_OR_RETURN(ShmOptions o, shm_options_from_env());
  o.key_prefix = (s.key_prefix.empty() ? std::string("hoop") : s.key_prefix) + "/shm";
  return connect(*s.store, s.info->rank, s.info->size, s.peers, s.info->job_id, o);
}

// The transport creates its segments with shm_open, i.e. files in /dev/shm.
transports::Probe probe() {
  const std::string path = fmt::format("/dev/shm/hoop-check-build-{}", ::getpid());
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return {false,
            fmt::format("compiled in, but /dev/shm is not writable: {}", std::strerror(errno))};
  ::close(fd);
  ::unlink(path.c_str());
  return {true, "compiled in, /dev/shm is writable"};
}

std::string refuses(const BootstrapInfo*, const transports::PairFacts& job) {
  if (job.hosts <= 1) return "";
  return fmt::format("the job spans {} hosts; shared memory reaches only the ranks of one host "
                     "(use auto, tcp or ucx)",
                     job.hosts);
}

const bool registered = [] {
  transports::TransportEntry e;
  e.name = "shm";
  e.built = true;
  e.probe = &probe;
  e.auto_takes = [](const transports::PairFacts& p) { return p.same_host; };
  e.auto_order = 10;
  e.refuses = &refuses;
  e.connect = &connect_spec;
  transports::register_transport(e);
  return true;
}();

}  // namespace
}  // namespace hoop::shm
