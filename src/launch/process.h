// One rank's process: finding the program, starting it in its own process group with its
// output on pipes, and describing how it ended.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/executable.h"
#include "core/fd.h"
#include "hoop/core.h"

namespace hoop::launch {

/// How a process ended: an exit code, or the signal that killed it.
struct ExitStatus {
  bool signaled = false;
  int value = 0;  // the exit code, or the signal number when `signaled`

  /// True for exit code 0.
  bool success() const { return !signaled && value == 0; }
  /// The code a shell reports for this status: the exit code, or 128 + signal.
  int shell_code() const;
  /// "exited with code 3" or "was killed by signal 9 (SIGKILL)".
  std::string describe() const;
};

/// "SIGINT", "SIGKILL", ...; "signal N" for a number without a name.
std::string signal_name(int signo);

/// Whether process `pid` (on this machine) is stopped, and by which signal: the signal for a
/// child of the caller, 0 for another process (the kernel says only that it is stopped);
/// nullopt while it runs, or once it has ended.
std::optional<int> stopped_by(pid_t pid);

/// find_executable and cannot_execute live in core/executable.h (the transports' probes use
/// them too).
using hoop::cannot_execute;
using hoop::find_executable;

/// What to start.
struct SpawnRequest {
  std::string path;               // the resolved executable
  std::vector<std::string> argv;  // argv[0] stays as the user wrote it
  std::vector<std::string> env;   // the complete environment, NAME=value entries
  int stdin_fd = -1;              // becomes the child's stdin
  sigset_t signal_mask{};         // the mask the child execs with
  bool inherit_output = false;    // keep the caller's stdout and stderr instead of pipes
};

/// Both ends of a pipe, close-on-exec.
struct Pipe {
  Fd read;
  Fd write;
};

/// A new pipe.
Result<Pipe> open_pipe();

/// A started child and the read ends of its output pipes (non-blocking, close-on-exec; not
/// valid with inherit_output).
struct ChildProcess {
  pid_t pid = -1;
  Fd stdout_fd;
  Fd stderr_fd;
};

/// Forks and execs `request`. The child leads its own process group (so that its own
/// children can be signalled with it), is killed when the calling thread dies, and inherits
/// no descriptor besides stdin, stdout and stderr. A failed exec is reported here, not by the
/// child: not_found when the program is gone, invalid_argument when it cannot be executed
/// (permission, format), io_error when the fork or the pipes failed.
Result<ChildProcess> spawn_process(const SpawnRequest& request);

/// Runs `argv` (the program at `path`) with environment `env` and stdin from /dev/null, and
/// returns what it wrote to stdout (stderr is read and dropped). io_error when it does not
/// exit 0, or is still running after `timeout` (it is killed then).
Result<std::string> run_for_output(const std::string& path, const std::vector<std::string>& argv,
                                   const std::vector<std::string>& env,
                                   std::chrono::seconds timeout);

}  // namespace hoop::launch
