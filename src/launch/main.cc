// hooprun: launches the ranks of a hoop job on this host or, through a spawner, on others. See
// options.cc for the command line, hosts.h for the placement of ranks and job.h for how the
// ranks are supervised.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/crypto.h"
#include "core/log.h"
#include "hoop/rendezvous.h"
#include "launch/check_build.h"
#include "launch/exit_codes.h"
#include "launch/hosts.h"
#include "launch/job.h"
#include "launch/mpi_launch.h"
#include "launch/options.h"
#include "launch/output.h"
#include "launch/process.h"
#include "launch/signals.h"
#include "transports/shm/shm_transport.h"

namespace hoop::launch {
namespace {

constexpr std::size_t kSecretBytes = 32;
constexpr std::size_t kJobIdBytes = 8;
// PATH as execvp assumes it when the variable is unset.
constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

void say(std::string_view message) {
  (void)write_all(STDERR_FILENO, fmt::format("hooprun: {}\n", message));
}

// A closed stdin, stdout or stderr would be reused by the first pipe hooprun opens, and the
// ranks' output would end up somewhere odd; point them at /dev/null instead.
void ensure_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

// --start-timeout, else HOOP_START_TIMEOUT (already validated), else the registry's default.
Result<double> start_timeout(const LaunchOptions& options) {
  double seconds = 0;
  std::string_view source = "--start-timeout ";
  if (options.start_timeout_s) {
    seconds = *options.start_timeout_s;
  } else {
    HOOP_ASSIGN_OR_RETURN(seconds, config::get_seconds("HOOP_START_TIMEOUT"));
    source = "HOOP_START_TIMEOUT=";
  }
  if (!(seconds > 0 && seconds <= kMaxStartTimeoutS)) {
    return invalid_argument(fmt::format("{}{} is out of range: expected seconds in (0, {}]", source,
                                        seconds, kMaxStartTimeoutS));
  }
  return seconds;
}

// A usage error (exit 2) or the status of a failed program look-up (126 or 127).
struct LaunchError {
  int exit_code;
  std::string message;
};

int exit_code_for_lookup(const Status& status) {
  return status.code() == StatusCode::kNotFound ? kExitNotFound : kExitCannotExecute;
}

// The rank program: the user's command, or hoop-topology from hooprun's own directory.
Result<std::vector<std::string>> rank_program(const LaunchOptions& options) {
  if (!options.topology) return options.command;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error)
    return io_error(fmt::format("--topology: cannot read /proc/self/exe: {}", error.message()));
  const std::string path = (self.parent_path() / "hoop-topology").string();
  if (Result<std::string> found = find_executable(path, ""); !found.ok()) {
    return found.status().with_context("--topology needs hoop-topology next to hooprun");
  }
  return std::vector<std::string>{path};
}

// What each rank executes: the program directly on this machine, else behind the spawner.
// Checked before anything starts, so that a typo costs no half-started job.
std::optional<LaunchError> plan_commands(const LaunchOptions& options, const Placement& placement,
                                         std::vector<RankCommand>& commands) {
  Result<std::vector<std::string>> program = rank_program(options);
  if (!program.ok())
    return LaunchError{exit_code_for_lookup(program.status()), program.status().message()};
  const char* path_env = std::getenv("PATH");
  const std::string_view path = path_env ? path_env : kDefaultPath;
  std::vector<RankCommand> per_host;
  for (const std::string& host : placement.hosts) {
    RankCommand command;
    if (options.spawner) {
      command.argv = expand_spawner(*options.spawner, host);
      command.argv.insert(command.argv.end(), program->begin(), program->end());
    } else if (is_local_host(host)) {
      command.argv = *program;
    } else {
      return LaunchError{kExitUsage,
                         fmt::format("host '{}' is not this machine: remote hosts need --spawner "
                                     "(e.g. --spawner \"ip netns exec {{host}}\")",
                                     host)};
    }
    Result<std::string> resolved = find_executable(command.argv.front(), path);
    if (!resolved.ok()) {
      return LaunchError{exit_code_for_lookup(resolved.status()), resolved.status().message()};
    }
    command.program_path = std::move(*resolved);
    per_host.push_back(std::move(command));
  }
  commands.clear();
  for (const RankPlace& place : placement.ranks) {
    commands.push_back(per_host.at(static_cast<std::size_t>(place.cross_rank)));
  }
  return std::nullopt;
}

int launch(const LaunchOptions& options) {
  if (Status s = config::validate_env(); !s.ok()) {
    say(s.message());
    return kExitUsage;
  }
  if (Status s = log::init_from_env(); !s.ok()) {
    say(s.message());
    return kExitUsage;
  }
  if (options.verbose && !log::enabled(log::Level::kInfo)) log::set_level(log::Level::kInfo);
  Result<double> timeout_s = start_timeout(options);
  if (!timeout_s.ok()) {
    say(timeout_s.status().message());
    return kExitUsage;
  }

  Result<Placement> placement = place_ranks(options.hosts, options.num_ranks);
  if (!placement.ok()) {
    say(placement.status().message());
    return kExitUsage;
  }
  JobSpec spec;
  if (std::optional<LaunchError> error = plan_commands(options, *placement, spec.commands)) {
    say(error->message);
    return error->exit_code;
  }
  Result<std::string> rendezvous_addr =
      choose_rendezvous_addr(options.rendezvous_addr, placement->hosts);
  if (!rendezvous_addr.ok()) {
    say(rendezvous_addr.status().message());
    return kExitFailure;
  }

  // Before the store's thread starts, so that it inherits the blocked signals.
  Result<SignalChannel> signals = SignalChannel::open();
  if (!signals.ok()) {
    say(signals.status().message());
    return kExitFailure;
  }

  Result<std::string> secret = crypto::random_hex(kSecretBytes);
  Result<std::string> job_id = crypto::random_hex(kJobIdBytes);
  if (!secret.ok() || !job_id.ok()) {
    say(fmt::format("cannot generate the job secret: {}",
                    (secret.ok() ? job_id.status() : secret.status()).message()));
    return kExitFailure;
  }

  spec.hosts = placement->hosts;
  spec.env.size = options.num_ranks;
  spec.env.places = placement->ranks;
  spec.env.num_hosts = static_cast<int>(placement->hosts.size());
  spec.env.rendezvous_addr = std::move(*rendezvous_addr);
  spec.env.secret = std::move(*secret);
  spec.env.job_id = std::move(*job_id);
  spec.env.start_timeout_s = *timeout_s;
  spec.inherited_env = current_environment();
  spec.verbose = options.verbose;

  const auto store_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(*timeout_s * 1000.0));
  Result<std::unique_ptr<StoreServer>> store = StoreServer::start(
      spec.env.rendezvous_addr, 0, StoreOptions{spec.env.secret, spec.env.job_id, store_timeout});
  if (!store.ok()) {
    say(fmt::format("cannot start the rendezvous store: {}", store.status().message()));
    return kExitFailure;
  }
  spec.env.rendezvous_port = (*store)->port();
  if (options.verbose) {
    say(fmt::format("job {}: {} rank{} on {} host{}, rendezvous store on {}:{}", spec.env.job_id,
                    options.num_ranks, options.num_ranks == 1 ? "" : "s", spec.hosts.size(),
                    spec.hosts.size() == 1 ? "" : "s", spec.env.rendezvous_addr,
                    spec.env.rendezvous_port));
  }

  const int code = run_job(spec, *signals);
  (*store)->stop();
  // Ranks unlink their segments once set up; a crash before that leaves them named.
  if (const int removed = shm::remove_job_segments(spec.env.job_id);
      removed > 0 && options.verbose) {
    say(fmt::format("removed {} shared-memory segment{} the job left in /dev/shm", removed,
                    removed == 1 ? "" : "s"));
  }
  if (options.verbose) say(fmt::format("exiting with code {}", code));
  return code;
}

}  // namespace
}  // namespace hoop::launch

int main(int argc, char** argv) {
  using namespace hoop::launch;
  ensure_standard_fds();
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  ParsedCommandLine parsed = parse_command_line(args);
  if (!parsed.options) {
    (void)write_all(parsed.exit_code == kExitSuccess ? STDOUT_FILENO : STDERR_FILENO,
                    parsed.message);
    return parsed.exit_code;
  }
  if (parsed.options->check_build) {
    (void)write_all(STDOUT_FILENO, check_build_report());
    return kExitSuccess;
  }
  if (parsed.options->mpi) return run_with_mpirun(*parsed.options);
  return launch(*parsed.options);
}
