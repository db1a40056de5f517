#include "launch/mpi_launch.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/crypto.h"
#include "launch/exit_codes.h"
#include "launch/output.h"
#include "launch/process.h"
#include "launch/rank_env.h"

namespace hoop::launch {
namespace {

constexpr std::size_t kSecretBytes = 32;

// The rank layout comes from mpirun; a HOOP_RANK inherited from an outer job would override it.
bool is_layout_variable(std::string_view name) {
  for (std::string_view prefix : {"HOOP_", "HOROVOD_"}) {
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = name.substr(prefix.size());
    for (std::string_view v : {"RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK",
                               "CROSS_SIZE"})
      if (rest == v) return true;
  }
  return false;
}

// Every HOOP_* and HOROVOD_* variable set here, and what finds programs and libraries.
std::vector<std::string> forwarded_names() {
  std::vector<std::string> names;
  for (const std::string& entry : current_environment()) {
    const std::string name = entry.substr(0, entry.find('='));
    const bool hoop = name.starts_with("HOOP_") || name.starts_with("HOROVOD_");
    const bool paths = name == "PATH" || name == "LD_LIBRARY_PATH" || name == "PYTHONPATH";
    if ((hoop && !is_layout_variable(name)) || paths) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool all_local(const LaunchOptions& options) {
  for (const HostSlots& h : options.hosts)
    if (!is_local_host(h.name)) return false;
  return true;
}

}  // namespace

std::vector<std::string> mpirun_command(const LaunchOptions& options,
                                        const std::vector<std::string>& forwarded) {
  std::string hosts;
  for (const HostSlots& h : options.hosts)
    hosts += fmt::format("{}{}:{}", hosts.empty() ? "" : ",", h.name, h.slots);
  std::vector<std::string> argv = {"mpirun", "--allow-run-as-root", "--tag-output", "-np",
                                   std::to_string(options.num_ranks), "-H", hosts,
                                   "-bind-to", "none", "-map-by", "slot", "-mca", "pml", "ob1",
                                   "-mca", "btl", "^openib"};
  for (const std::string& name : forwarded) {
    argv.push_back("-x");
    argv.push_back(name);
  }
  argv.insert(argv.end(), options.command.begin(), options.command.end());
  return argv;
}

int run_with_mpirun(const LaunchOptions& options) {
  const char* path = std::getenv("PATH");
  Result<std::string> mpirun = find_executable("mpirun", path ? path : "");
  if (!mpirun.ok()) {
    say(fmt::format("--mpi: mpirun is not on PATH ({}); install Open MPI or launch without "
                    "--mpi",
                    mpirun.status().message()));
    return mpirun.status().code() == StatusCode::kNotFound ? kExitNotFound : kExitCannotExecute;
  }
  Result<std::string> secret = crypto::random_hex(kSecretBytes);
  if (!secret.ok()) {
    say(fmt::format("cannot generate the job secret: {}", secret.status().message()));
    return kExitFailure;
  }
  // mpirun passes `-x NAME` on with the value from its environment: the secret never
  // appears on a command line, where any user of the host could read it.
  ::setenv("HOOP_SECRET", secret->c_str(), 1);
  if (!all_local(options)) {
    // -map-by slot puts rank 0 on the first host; it hosts the store there.
    const std::string addr = options.rendezvous_addr.value_or(options.hosts.front().name);
    ::setenv("HOOP_RENDEZVOUS_ADDR", addr.c_str(), 1);
  }
  if (options.start_timeout_s) {
    ::setenv("HOOP_START_TIMEOUT", fmt::format("{}", *options.start_timeout_s).c_str(), 1);
  }
  const std::vector<std::string> argv = mpirun_command(options, forwarded_names());
  if (options.verbose) {
    std::string line;
    for (const std::string& a : argv) line += (line.empty() ? "" : " ") + a;
    say(fmt::format("running {}", line));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(mpirun->c_str(), args.data());
  say(fmt::format("cannot execute {}: {}", *mpirun, std::strerror(errno)));
  return kExitCannotExecute;
}

}  // namespace hoop::launch
