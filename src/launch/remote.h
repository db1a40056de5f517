// How hooprun reaches a host: directly (this machine), through --spawner, or over ssh; and
// the command lines that start a program there. A program started over ssh runs under
// hooprun's agent (agent.h) from the same path on the remote host.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hoop::launch {

/// The first argument that makes hooprun the agent that runs one rank (agent.h).
inline constexpr std::string_view kRankAgentFlag = "--internal-rank-agent";
/// The first argument that makes hooprun a preflight probe (agent.h).
inline constexpr std::string_view kProbeAgentFlag = "--internal-probe";

/// ssh's -p and -i, and its ConnectTimeout (0: ssh's own default).
struct SshOptions {
  std::optional<int> port;
  std::optional<std::string> identity_file;
  int connect_timeout_s = 0;
};

/// How the commands for one host are started.
struct HostAccess {
  enum class Kind { kLocal, kSpawner, kSsh };
  Kind kind = Kind::kLocal;
  std::string host;
  std::vector<std::string> spawner;  // the expanded prefix, for kSpawner
  SshOptions ssh;
};

/// kSpawner when a spawner is given, else kLocal for this machine, else kSsh.
HostAccess host_access(const std::string& host, const std::optional<std::string>& spawner,
                       const SshOptions& ssh);

/// "over ssh (port 2222)", "through --spawner" or "on this machine", for messages.
std::string describe_access(const HostAccess& access);

/// The shell command line that enters `workdir` and execs `argv` with `env` (NAME=value
/// entries) added to the environment; every word is quoted for a POSIX shell.
std::string remote_shell_command(std::string_view workdir, std::span<const std::string> env,
                                 std::span<const std::string> argv);

/// The argv that runs `argv` on the host: `argv` itself, behind the spawner, or ssh (batch
/// mode, no host-key prompts, -p and -i) with remote_shell_command(workdir, env, argv). `env`
/// is used only over ssh: locally and behind a spawner the process inherits its environment.
std::vector<std::string> command_on_host(const HostAccess& access, std::span<const std::string> env,
                                         std::span<const std::string> argv,
                                         std::string_view workdir);

/// The entries of `env` that a rank started over ssh gets on the remote command line:
/// HOOP_*, HOROVOD_*, PATH, LD_LIBRARY_PATH, PYTHONPATH and the names in `extra_names`, never
/// the job secret (which travels on ssh's stdin).
std::vector<std::string> ssh_environment(std::span<const std::string> env,
                                         std::span<const std::string> extra_names);

}  // namespace hoop::launch
