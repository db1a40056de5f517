#include "launch/agent.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <vector>

#include "core/socket.h"
#include "launch/exit_codes.h"
#include "launch/job.h"
#include "launch/output.h"
#include "launch/process.h"
#include "launch/rank_env.h"
#include "launch/signals.h"
#include "transports/tcp/tcp_mesh.h"

namespace hoop::launch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxLineBytes = 4096;
constexpr int kAcceptPollMs = 100;

std::string this_host() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "this host";
}

/// The agent's own message on stderr, naming its host.
void tell(std::string_view message) {
  (void)write_all(STDERR_FILENO, fmt::format("hooprun agent on {}: {}\n", this_host(), message));
}

// One line from `fd`, read a byte at a time so that nothing after it is consumed; nullopt at
// the end of the input or when the line grows too long.
std::optional<std::string> read_line(int fd) {
  std::string line;
  while (line.size() < kMaxLineBytes) {
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    if (c == '\n') return line;
    line += c;
  }
  return std::nullopt;
}

// Waits for the rank while watching stdin and the signals; see run_rank_agent.
int supervise(pid_t pid, SignalChannel& signals) {
  bool stdin_open = true;
  std::optional<Clock::time_point> kill_at;
  while (true) {
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {stdin_open ? STDIN_FILENO : -1, POLLIN, 0}};
    int timeout_ms = -1;
    if (kill_at) {
      timeout_ms = static_cast<int>(std::max<std::int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(*kill_at - Clock::now()).count(), 0));
    }
    if (::poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
      tell(errno_error("poll", errno).message());
      ::kill(-pid, SIGKILL);
    }
    if (fds[1].revents != 0) {
      char buffer[256];
      const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        // hooprun, or the connection to it, is gone: nobody is left to watch this rank.
        stdin_open = false;
        ::kill(-pid, SIGTERM);
        kill_at = Clock::now() + kGracePeriod;
      }
    }
    if (kill_at && Clock::now() >= *kill_at) {
      ::kill(-pid, SIGKILL);
      kill_at.reset();
    }
    if (fds[0].revents == 0) continue;
    Result<std::vector<int>> received = signals.drain();
    if (!received.ok()) {
      tell(received.status().message());
      ::kill(-pid, SIGKILL);
      received = std::vector<int>{SIGCHLD};
    }
    for (int signo : *received) {
      if (signo != SIGCHLD) {
        ::kill(-pid, signo);
        continue;
      }
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          info.si_pid == 0) {
        continue;
      }
      // What the rank left in its group goes with it, as under hooprun; the unreaped leader
      // keeps the group id from being reused meanwhile.
      ::kill(-pid, SIGTERM);
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return WIFSIGNALED(status) ? kExitSignalBase + WTERMSIG(status) : WEXITSTATUS(status);
    }
  }
}

}  // namespace

int run_rank_agent(std::span<const std::string> command) {
  if (!command.empty() && command.front() == "--") command = command.subspan(1);
  if (command.empty()) {
    tell("no command to run");
    return kExitUsage;
  }
  std::optional<std::string> secret = read_line(STDIN_FILENO);
  if (!secret) {
    tell("no job secret on stdin");
    return kExitFailure;
  }
  ::setenv(std::string(kSecretVar).c_str(), secret->c_str(), 1);
  Result<SignalChannel> signals = SignalChannel::open();
  if (!signals.ok()) {
    tell(signals.status().message());
    return kExitFailure;
  }
  const char* path_env = std::getenv("PATH");
  Result<std::string> path = find_executable(command.front(), path_env ? path_env : "");
  if (!path.ok()) {
    tell(path.status().message());
    return path.status().code() == StatusCode::kNotFound ? kExitNotFound : kExitCannotExecute;
  }
  Fd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  SpawnRequest request{*path,
                       std::vector<std::string>(command.begin(), command.end()),
                       current_environment(),
                       dev_null.get(),
                       signals->original_mask(),
                       true};
  Result<ChildProcess> child = spawn_process(request);
  if (!child.ok()) {
    tell(child.status().message());
    return child.status().code() == StatusCode::kNotFound ? kExitNotFound : kExitCannotExecute;
  }
  return supervise(child->pid, *signals);
}

namespace {

// Connects to a peer probe and checks that it answers with `token`; the error names the
// address and the cause.
Status check_peer(const std::string& addr, std::uint16_t port, const std::string& token,
                  net::Deadline deadline) {
  const std::string where = net::format_host_port(addr, port);
  HOOP_ASSIGN_OR_RETURN(std::vector<net::SocketAddress> resolved, net::resolve(addr, port));
  if (resolved.empty()) return not_found(fmt::format("{} resolves to no address", where));
  const net::SocketAddress& target = resolved.front();
  Fd fd(::socket(target.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno_error("socket", errno);
  // One attempt: every probe listens before any connects, so a refusal is the answer.
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&target.storage), target.length) != 0 &&
      errno != EINPROGRESS) {
    return errno_error(fmt::format("cannot connect to {}", where), errno);
  }
  pollfd pfd{fd.get(), POLLOUT, 0};
  const int ready = ::poll(&pfd, 1, static_cast<int>(net::remaining(deadline).count()));
  if (ready == 0) return timeout_error(fmt::format("connecting to {} timed out", where));
  int error = 0;
  socklen_t length = sizeof error;
  if (ready < 0 || ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    error = errno;
  }
  if (error != 0) return errno_error(fmt::format("cannot connect to {}", where), error);
  std::string answer(token.size() + 1, '\0');
  HOOP_RETURN_IF_ERROR(
      net::read_exact(fd.get(), answer.data(), answer.size(), deadline, "probe at " + where));
  if (answer != token + "\n") {
    return invalid_argument(
        fmt::format("{} answered, but it is not the probe on that host (a different host or "
                    "network namespace owns that address here)",
                    where));
  }
  return Status::success();
}

// Answers every connection to `listener` with `token` until `stop`.
void answer_peers(int listener, const std::string& token, const std::atomic<bool>& stop) {
  const std::string line = token + "\n";
  while (!stop.load()) {
    pollfd pfd{listener, POLLIN, 0};
    if (::poll(&pfd, 1, kAcceptPollMs) <= 0) continue;
    Fd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.valid()) (void)::send(conn.get(), line.data(), line.size(), MSG_NOSIGNAL);
  }
}

void reply(std::string_view line) {
  (void)write_all(STDOUT_FILENO, fmt::format("hoop-probe {}\n", line));
}

}  // namespace

int run_probe_agent(std::span<const std::string> args) {
  if (args.size() != 3) {
    reply("error the probe takes an interface, a token and a timeout");
    return kExitUsage;
  }
  const std::string& iface = args[0];
  const std::string& token = args[1];
  const double timeout_s = std::atof(args[2].c_str());
  Result<std::string> addr = tcp::choose_bind_address(iface);
  Result<net::Listener> listener =
      addr.ok() ? net::listen_tcp(*addr, 0) : Result<net::Listener>(addr.status());
  if (!listener.ok()) {
    reply(fmt::format("error {}", listener.status().message()));
    return kExitFailure;
  }
  reply(fmt::format("listening {} {}", *addr, listener->port));
  std::atomic<bool> stop{false};
  std::thread answering(answer_peers, listener->fd.get(), token, std::cref(stop));

  struct Peer {
    std::string index, addr, token;
    std::uint16_t port = 0;
  };
  std::vector<Peer> peers;
  std::optional<std::string> line;
  while ((line = read_line(STDIN_FILENO)) && *line != "go") {
    std::istringstream words(*line);
    std::string kind;
    Peer peer;
    if (words >> kind >> peer.index >> peer.addr >> peer.port >> peer.token && kind == "peer") {
      peers.push_back(std::move(peer));
    }
  }
  if (line) {
    const net::Deadline deadline = net::deadline_after(
        std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000.0)));
    for (const Peer& peer : peers) {
      const Status status = check_peer(peer.addr, peer.port, peer.token, deadline);
      reply(status.ok() ? fmt::format("ok {}", peer.index)
                        : fmt::format("fail {} {}", peer.index, status.message()));
    }
    reply("done");
    // The other probes may still be connecting here.
    while (read_line(STDIN_FILENO)) {
    }
  }
  stop = true;
  answering.join();
  return kExitSuccess;
}

}  // namespace hoop::launch
