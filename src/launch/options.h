// hooprun's command line: `hooprun [-np N] [-H hosts] [options] [--] command args...`.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "launch/hosts.h"

namespace hoop::launch {

/// The longest start timeout accepted, by --start-timeout as by HOOP_START_TIMEOUT: far beyond
/// any real start-up, and small enough to convert to milliseconds exactly.
inline constexpr double kMaxStartTimeoutS = static_cast<double>(config::kMaxSeconds);

/// An elastic job (--host-discovery-script): its hosts come from a script that hooprun runs
/// again while the job runs, and its workers may come and go (elastic.h).
struct ElasticOptions {
  std::string discovery_script;
  int min_np = 1;                  // --min-np [default: -np]
  std::optional<int> max_np;       // --max-np [default: no limit]
  double timeout_s = 600;          // --elastic-timeout
  std::optional<int> reset_limit;  // --reset-limit [default: no limit]
  int default_slots = 1;           // --slots: of a discovered host listed without a count
};

/// What the user asked for.
struct LaunchOptions {
  int num_ranks = 0;
  /// From -H; without it, "localhost" with num_ranks slots. Never more ranks than slots.
  std::vector<HostSlots> hosts;
  /// From --spawner: the command prefix that starts each rank, "{host}" not yet replaced.
  std::optional<std::string> spawner;
  /// From --rendezvous-addr; unset means choose_rendezvous_addr's default.
  std::optional<std::string> rendezvous_addr;
  /// --topology: run hoop-topology (next to hooprun) instead of a command, which is empty.
  bool topology = false;
  /// From --start-timeout; unset means HOOP_START_TIMEOUT from the environment, else 30.
  std::optional<double> start_timeout_s;
  bool verbose = false;
  /// From -p/--ssh-port and -i/--ssh-identity-file: how ranks on other hosts are reached when
  /// there is no --spawner.
  std::optional<int> ssh_port;
  std::optional<std::string> ssh_identity_file;
  /// From --network-interface: the interface the ranks' TCP transport binds (HOOP_IFACE), also
  /// used to choose the rendezvous address and checked by the preflight.
  std::optional<std::string> network_interface;
  /// From --output-filename: each rank's output is also written to DIR/rank.N/{stdout,stderr}.
  std::optional<std::string> output_dir;
  /// From --disable-preflight: skip the reachability checks of a job across hosts.
  bool preflight = true;
  /// From -x/--env: NAME (forwarded from hooprun's environment) or NAME=VALUE (set).
  std::vector<std::string> env_vars;
  /// Set by --host-discovery-script; num_ranks is then the number to start with.
  std::optional<ElasticOptions> elastic;
  /// --mpi: mpirun starts the ranks (see mpi_launch.h).
  bool mpi = false;
  /// --check-build: print what this build can do (check_build.h); nothing else is set.
  bool check_build = false;
  /// The program and its arguments, exactly as given.
  std::vector<std::string> command;
};

/// The outcome of parsing: options to run with, or text to print and a code to exit with.
struct ParsedCommandLine {
  std::optional<LaunchOptions> options;
  int exit_code = 0;
  /// The help (for stdout, exit code 0) or the error message (for stderr).
  std::string message;
};

/// Parses `args` (without the program name). `-np` is accepted as well as `-n` and
/// `--num-proc`, and may be left out with -H (then it is the total of the slots); the first
/// argument that is not an option of hooprun, or everything after
/// `--`, is the command, so its own options are never taken for hooprun's.
ParsedCommandLine parse_command_line(std::span<const std::string> args);

}  // namespace hoop::launch
