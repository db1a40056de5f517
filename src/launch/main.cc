// hooprun: launches the ranks of a hoop job on this host or, through a spawner, on others. See
// options.cc for the command line, hosts.h for the placement of ranks and job.h for how the
// ranks are supervised.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/crypto.h"
#include "core/log.h"
#include "hoop/rendezvous.h"
#include "launch/agent.h"
#include "launch/check_build.h"
#include "launch/elastic.h"
#include "launch/exit_codes.h"
#include "launch/hosts.h"
#include "launch/job.h"
#include "launch/mpi_launch.h"
#include "launch/options.h"
#include "launch/output.h"
#include "launch/preflight.h"
#include "launch/process.h"
#include "launch/python_check.h"
#include "launch/remote.h"
#include "launch/signals.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_mesh.h"

namespace hoop::launch {
namespace {

constexpr std::size_t kSecretBytes = 32;
constexpr std::size_t kJobIdBytes = 8;
// PATH as execvp assumes it when the variable is unset.
constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

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

// --start-timeout, else HOOP_START_TIMEOUT, else the registry's default; the option parser and
// the registry both hold it to (0, kMaxStartTimeoutS].
Result<double> start_timeout(const LaunchOptions& options) {
  if (options.start_timeout_s) return *options.start_timeout_s;
  return config::get_seconds("HOOP_START_TIMEOUT");
}

// Every declared variable the ranks would get malformed, from hooprun's environment or from
// -x NAME=VALUE, is an error naming it before any rank starts: otherwise every rank would fail
// on its own, and hooprun would report only their exit codes.
Status check_environment(const LaunchOptions& options) {
  HOOP_RETURN_IF_ERROR(config::validate_env());
  for (const std::string& var : options.env_vars) {
    const std::size_t eq = var.find('=');
    if (eq == std::string::npos) continue;  // -x NAME passes on hooprun's value, checked above
    const std::string name = var.substr(0, eq);
    const std::string value = var.substr(eq + 1);
    const config::EnvLookup only_this = [&](std::string_view n) -> std::optional<std::string> {
      if (n == name) return value;
      return std::nullopt;
    };
    if (Status s = config::validate_env(only_this); !s.ok()) return s.with_context("-x");
  }
  return Status::success();
}

// A usage error (exit 2) or the status of a failed program look-up (126 or 127).
struct LaunchError {
  int exit_code;
  std::string message;
};

int exit_code_for_lookup(const Status& status) {
  return status.code() == StatusCode::kNotFound ? kExitNotFound : kExitCannotExecute;
}

// hooprun's own path: where it looks for hoop-topology, and where other hosts run it as their
// agent.
Result<std::filesystem::path> self_path() {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return io_error(fmt::format("cannot read /proc/self/exe: {}", error.message()));
  return self;
}

// The rank program: the user's command, or hoop-topology from hooprun's own directory.
Result<std::vector<std::string>> rank_program(const LaunchOptions& options) {
  if (!options.topology) return options.command;
  Result<std::filesystem::path> self = self_path();
  if (!self.ok()) return self.status().with_context("--topology");
  const std::string path = (self->parent_path() / "hoop-topology").string();
  if (Result<std::string> found = find_executable(path, ""); !found.ok()) {
    return found.status().with_context("--topology needs hoop-topology next to hooprun");
  }
  return std::vector<std::string>{path};
}

// How a rank on `host` starts: the program directly on this machine, behind the spawner, or
// over ssh under hooprun's agent. not_found or invalid_argument when the program or ssh cannot
// be executed, io_error when hooprun cannot find itself.
Result<RankCommand> command_for_host(const LaunchOptions& options,
                                     const std::vector<std::string>& program,
                                     const std::string& host, double timeout_s) {
  const char* path_env = std::getenv("PATH");
  const std::string_view path = path_env ? path_env : kDefaultPath;
  // A host that does not answer is given up after the time ranks have to start.
  const SshOptions ssh{options.ssh_port, options.ssh_identity_file,
                       static_cast<int>(std::ceil(timeout_s))};
  RankCommand command;
  command.access = host_access(host, options.spawner, ssh);
  if (command.access.kind == HostAccess::Kind::kSsh) {
    HOOP_ASSIGN_OR_RETURN(std::filesystem::path self, self_path());
    std::vector<std::string> remote{self.string(), std::string(kRankAgentFlag), "--"};
    remote.insert(remote.end(), program.begin(), program.end());
    command.remote_argv = std::move(remote);
    command.argv = {"ssh"};
  } else {
    command.argv = command_on_host(command.access, {}, program, "");
  }
  Result<std::string> resolved = find_executable(command.argv.front(), path);
  if (!resolved.ok()) {
    if (command.access.kind != HostAccess::Kind::kSsh) return resolved.status();
    return Status(resolved.status().code(),
                  fmt::format("host '{}' is not this machine and is reached over ssh: {}", host,
                              resolved.status().message()));
  }
  command.program_path = std::move(*resolved);
  return command;
}

int exit_code_for_command(const Status& status) {
  return status.code() == StatusCode::kIoError ? kExitFailure : exit_code_for_lookup(status);
}

// What each rank executes, checked before anything starts, so that a typo costs no
// half-started job.
std::optional<LaunchError> plan_commands(const LaunchOptions& options, const Placement& placement,
                                         double timeout_s, std::vector<RankCommand>& commands) {
  Result<std::vector<std::string>> program = rank_program(options);
  if (!program.ok())
    return LaunchError{exit_code_for_lookup(program.status()), program.status().message()};
  std::vector<RankCommand> per_host;
  for (const std::string& host : placement.hosts) {
    Result<RankCommand> command = command_for_host(options, *program, host, timeout_s);
    if (!command.ok())
      return LaunchError{exit_code_for_command(command.status()), command.status().message()};
    per_host.push_back(std::move(*command));
  }
  commands.clear();
  for (const RankPlace& place : placement.ranks) {
    commands.push_back(per_host.at(static_cast<std::size_t>(place.cross_rank)));
  }
  return std::nullopt;
}

// -x NAME=VALUE sets the variable for every rank; -x NAME passes hooprun's own value on to
// ranks over ssh too.
void apply_env_options(const std::vector<std::string>& vars, std::vector<std::string>& env,
                       std::vector<std::string>& forwarded_names) {
  for (const std::string& var : vars) {
    const std::string name = var.substr(0, var.find('='));
    forwarded_names.push_back(name);
    if (name.size() == var.size()) continue;
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(name + "="); });
    env.push_back(var);
  }
}

// A Python command must find what its script imports (python_check.h). Checked where the
// ranks' interpreter is this machine's: every rank local or behind a spawner.
int check_python(const LaunchOptions& options, const JobSpec& spec) {
  if (options.elastic || options.topology || spec.commands.empty()) return kExitSuccess;
  for (const RankCommand& command : spec.commands)
    if (command.access.kind == HostAccess::Kind::kSsh) return kExitSuccess;
  const PythonCommand python = inspect_python_command(options.command, spec.workdir);
  if (!python.is_python) return kExitSuccess;
  // The interpreter itself, not a spawner in front of it; found as the ranks will find it.
  const char* path_env = std::getenv("PATH");
  Result<std::string> interpreter =
      find_executable(options.command.front(), path_env ? path_env : kDefaultPath);
  if (!interpreter.ok()) return kExitSuccess;  // the launch names a missing program itself
  const Status s = check_python_command(python, *interpreter, spec.inherited_env);
  if (s.ok()) return kExitSuccess;
  say(s.message());
  return kExitUsage;
}

// The preflight of a job across hosts (preflight.h); hooprun's exit code.
int preflight(const LaunchOptions& options, const JobSpec& spec, double timeout_s,
              SignalChannel& signals) {
  PreflightSpec pre;
  for (const RankCommand& command : spec.commands) {
    if (pre.hosts.empty() || pre.hosts.back().host != command.access.host) {
      pre.hosts.push_back(command.access);
    }
  }
  if (!needs_preflight(pre.hosts)) return kExitSuccess;
  Result<std::filesystem::path> self = self_path();
  if (!self.ok()) {
    say(self.status().message());
    return kExitFailure;
  }
  pre.agent_path = self->string();
  // Without --network-interface the ranks bind what their inherited HOOP_IFACE says.
  if (options.network_interface) {
    pre.iface = *options.network_interface;
  } else if (Result<std::string> iface = config::get_string("HOOP_IFACE"); iface.ok()) {
    pre.iface = *iface;
  }
  pre.timeout_s = timeout_s;
  pre.workdir = spec.workdir;
  pre.ssh_env = ssh_environment(spec.inherited_env, spec.forwarded_names);
  int stop_signal = 0;
  const Status status = run_preflight(pre, signals, stop_signal);
  if (status.ok()) {
    if (options.verbose) say(fmt::format("preflight passed on {} hosts", pre.hosts.size()));
    return kExitSuccess;
  }
  say(status.message());
  return stop_signal != 0 ? kExitSignalBase + stop_signal : kExitFailure;
}

int launch(const LaunchOptions& options) {
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

  JobSpec spec;
  std::vector<std::string> hosts;  // of a fixed job; an elastic job's come later
  std::vector<std::string> program;
  if (options.elastic) {
    Result<std::vector<std::string>> found = rank_program(options);
    if (!found.ok()) {
      say(found.status().message());
      return exit_code_for_lookup(found.status());
    }
    program = std::move(*found);
  } else {
    Result<Placement> placement = place_ranks(options.hosts, options.num_ranks);
    if (!placement.ok()) {
      say(placement.status().message());
      return kExitUsage;
    }
    if (std::optional<LaunchError> error =
            plan_commands(options, *placement, *timeout_s, spec.commands)) {
      say(error->message);
      return error->exit_code;
    }
    hosts = placement->hosts;
    spec.env.places = placement->ranks;
  }
  // With --network-interface, the store listens where the ranks' transport will.
  std::optional<std::string> given_addr = options.rendezvous_addr;
  if (!given_addr && options.network_interface) {
    Result<std::string> addr = tcp::choose_bind_address(*options.network_interface);
    if (!addr.ok()) {
      say(fmt::format("--network-interface: {}", addr.status().message()));
      return kExitUsage;
    }
    given_addr = std::move(*addr);
  }
  // An elastic job without an address keeps its store on this machine's loopback: jobs that
  // grow to other hosts name the address (README, "Elastic training").
  if (options.elastic) hosts = {"localhost"};
  Result<std::string> rendezvous_addr = choose_rendezvous_addr(given_addr, hosts);
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

  std::error_code cwd_error;
  spec.workdir = std::filesystem::current_path(cwd_error).string();
  spec.inherited_env = current_environment();
  apply_env_options(options.env_vars, spec.inherited_env, spec.forwarded_names);
  if (int code = check_python(options, spec); code != kExitSuccess) return code;
  if (options.preflight && !options.elastic) {
    if (int code = preflight(options, spec, *timeout_s, *signals); code != kExitSuccess)
      return code;
  }
  if (options.output_dir) {
    std::error_code error;
    std::filesystem::create_directories(*options.output_dir, error);
    if (error) {
      say(fmt::format("--output-filename: cannot create the directory '{}': {}",
                      *options.output_dir, error.message()));
      return kExitFailure;
    }
    spec.output_dir = options.output_dir;
  }

  Result<std::string> secret = crypto::random_hex(kSecretBytes);
  Result<std::string> job_id = crypto::random_hex(kJobIdBytes);
  if (!secret.ok() || !job_id.ok()) {
    say(fmt::format("cannot generate the job secret: {}",
                    (secret.ok() ? job_id.status() : secret.status()).message()));
    return kExitFailure;
  }

  spec.hosts = hosts;
  spec.env.size = options.num_ranks;
  spec.env.num_hosts = static_cast<int>(hosts.size());
  spec.env.rendezvous_addr = std::move(*rendezvous_addr);
  spec.env.secret = std::move(*secret);
  spec.env.job_id = std::move(*job_id);
  spec.env.start_timeout_s = *timeout_s;
  spec.env.iface = options.network_interface.value_or("");
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
  if (options.verbose && !options.elastic) {
    say(fmt::format("job {}: {} rank{} on {} host{}, rendezvous store on {}:{}", spec.env.job_id,
                    options.num_ranks, options.num_ranks == 1 ? "" : "s", spec.hosts.size(),
                    spec.hosts.size() == 1 ? "" : "s", spec.env.rendezvous_addr,
                    spec.env.rendezvous_port));
  }

  int code = kExitSuccess;
  if (options.elastic) {
    const CommandFactory factory = [&](const std::string& host) {
      return command_for_host(options, program, host, *timeout_s);
    };
    code = run_elastic_job(*options.elastic, options.num_ranks, spec, factory, *signals);
  } else {
    code = run_job(spec, *signals);
  }
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
  // The remote side of a job across hosts (agent.h), never typed by a user.
  if (!args.empty() && args.front() == kRankAgentFlag) {
    return run_rank_agent(std::span(args).subspan(1));
  }
  if (!args.empty() && args.front() == kProbeAgentFlag) {
    return run_probe_agent(std::span(args).subspan(1));
  }
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
  if (hoop::Status s = check_environment(*parsed.options); !s.ok()) {
    say(s.message());
    return kExitUsage;
  }
  if (parsed.options->mpi) return run_with_mpirun(*parsed.options);
  return launch(*parsed.options);
}
