#include "launch/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>

#include "launch/exit_codes.h"

namespace hoop::launch {
namespace {

// Only async-signal-safe calls from here on: the parent may have other threads (the
// rendezvous store), whose locks the child inherits in whatever state they were.
[[noreturn]] void exec_child(const SpawnRequest& request, pid_t parent, char* const* argv,
                             char* const* envp, int out_fd, int err_fd, int report_fd) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died before prctl; then nobody would ever kill this child.
  if (::getppid() != parent) ::_exit(kExitFailure);
  ::sigprocmask(SIG_SETMASK, &request.signal_mask, nullptr);
  int error = 0;
  if (::dup2(request.stdin_fd, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
      ::dup2(err_fd, STDERR_FILENO) < 0) {
    error = errno;
  } else {
    // Nothing of the launcher (store sockets, other ranks' pipes) leaks into the rank. Older
    // kernels without CLOSE_RANGE_CLOEXEC leave the descriptors as they are, which is no worse.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execve(request.path.c_str(), argv, envp);
    error = errno;
  }
  ssize_t ignored = ::write(report_fd, &error, sizeof(error));
  (void)ignored;
  ::_exit(kExitNotFound);
}

}  // namespace

Result<Pipe> open_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno_error("pipe2", errno);
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

namespace {

std::vector<char*> to_c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

int ExitStatus::shell_code() const { return signaled ? kExitSignalBase + value : value; }

std::string ExitStatus::describe() const {
  if (signaled) return fmt::format("was killed by signal {} ({})", value, signal_name(value));
  return fmt::format("exited with code {}", value);
}

std::string signal_name(int signo) {
  const char* abbrev = ::sigabbrev_np(signo);
  if (abbrev == nullptr) return fmt::format("signal {}", signo);
  return fmt::format("SIG{}", abbrev);
}

std::optional<int> stopped_by(pid_t pid) {
  // WNOWAIT leaves the stop (and a later exit) to be reported again; the supervisor waits for
  // exits only.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
      info.si_pid == pid && info.si_code == CLD_STOPPED) {
    return info.si_status;
  }
  // Not a child (or its stop was already reported): field 3 of /proc/PID/stat, after the
  // command name in parentheses, which may itself contain ") ".
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const std::size_t close = text.rfind(") ");
  if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  const char state = text[close + 2];
  if (state == 'T' || state == 't') return 0;
  return std::nullopt;
}

Result<ChildProcess> spawn_process(const SpawnRequest& request) {
  if (request.argv.empty()) return invalid_argument("spawn_process: empty argv");
  Pipe out, err;
  if (!request.inherit_output) {
    HOOP_ASSIGN_OR_RETURN(out, open_pipe());
    HOOP_ASSIGN_OR_RETURN(err, open_pipe());
  }
  HOOP_ASSIGN_OR_RETURN(Pipe report, open_pipe());
  std::vector<char*> argv = to_c_strings(request.argv);
  std::vector<char*> envp = to_c_strings(request.env);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) return errno_error("fork", errno);
  if (pid == 0) {
    exec_child(request, parent, argv.data(), envp.data(),
               request.inherit_output ? STDOUT_FILENO : out.write.get(),
               request.inherit_output ? STDERR_FILENO : err.write.get(), report.write.get());
  }
  // Also set from this side, so that the group exists before anyone signals it. EACCES
  // means the child has already exec'ed, after its own setpgid.
  ::setpgid(pid, pid);
  out.write.reset();
  err.write.reset();
  report.write.reset();

  int exec_error = 0;
  ssize_t n;
  do {
    n = ::read(report.read.get(), &exec_error, sizeof(exec_error));
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return cannot_execute(request.argv.front(), exec_error);
  }

  for (int fd : {out.read.get(), err.read.get()}) {
    if (fd < 0) continue;
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
      // The child runs already; it must not be left behind unsupervised.
      const int error = errno;
      ::kill(-pid, SIGKILL);
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return errno_error("fcntl(O_NONBLOCK)", error);
    }
  }
  return ChildProcess{pid, std::move(out.read), std::move(err.read)};
}

Result<std::string> run_for_output(const std::string& path, const std::vector<std::string>& argv,
                                   const std::vector<std::string>& env,
                                   std::chrono::seconds timeout) {
  const Fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null.valid()) return errno_error("open /dev/null", errno);
  SpawnRequest request;
  request.path = path;
  request.argv = argv;
  request.env = env;
  request.stdin_fd = null.get();
  HOOP_ASSIGN_OR_RETURN(ChildProcess child, spawn_process(request));
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool open[2] = {true, true};
  while ((open[0] || open[1]) && std::chrono::steady_clock::now() < deadline) {
    pollfd fds[2] = {{child.stdout_fd.get(), POLLIN, 0}, {child.stderr_fd.get(), POLLIN, 0}};
    if (::poll(fds, 2, 100) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (!open[i] || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0 && i == 0) out.append(buf, static_cast<std::size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) open[i] = false;
    }
  }
  if (open[0] || open[1]) ::kill(-child.pid, SIGKILL);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return io_error(fmt::format("{} did not run ({})", path,
                                open[0] || open[1]
                                    ? fmt::format("it took longer than {} s", timeout.count())
                                    : "it failed"));
  return out;
}


}  // namespace hoop::launch
