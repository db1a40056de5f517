#include "launch/preflight.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <thread>

#include "core/crypto.h"
#include "launch/output.h"
#include "launch/process.h"
#include "launch/rank_env.h"

namespace hoop::launch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kTokenBytes = 8;
constexpr std::size_t kShownErrorLines = 5;
constexpr std::chrono::seconds kExitWait{2};
constexpr std::string_view kReplyPrefix = "hoop-probe ";

// One probe process and what it said so far.
struct Probe {
  const HostAccess* access = nullptr;
  std::string token;
  pid_t pid = -1;
  Fd stdin_w;
  Fd out;
  Fd err;
  std::string out_pending;
  TailLines err_tail{kShownErrorLines};
  std::optional<std::string> error;                              // "hoop-probe error ..."
  std::optional<std::pair<std::string, std::string>> listening;  // address, port
  std::vector<std::pair<std::size_t, std::string>> failures;     // peer index, message
  bool done = false;

  bool output_open() const { return out.valid() || err.valid(); }
};

std::string interface_text(const std::string& iface) {
  return iface.empty() ? "the default interface (no --network-interface)"
                       : fmt::format("interface '{}'", iface);
}

void handle_reply(Probe& probe, std::string_view line) {
  if (!line.starts_with(kReplyPrefix)) return;
  std::istringstream words{std::string(line.substr(kReplyPrefix.size()))};
  std::string kind;
  words >> kind;
  if (kind == "listening") {
    std::string addr, port;
    if (words >> addr >> port) probe.listening.emplace(addr, port);
  } else if (kind == "error") {
    probe.error = std::string(line.substr(kReplyPrefix.size() + kind.size() + 1));
  } else if (kind == "fail") {
    std::size_t index = 0;
    words >> index;
    std::string message;
    std::getline(words >> std::ws, message);
    probe.failures.emplace_back(index, message);
  } else if (kind == "done") {
    probe.done = true;
  }
}

// Reads what is waiting on one of a probe's pipes; closes it at its end.
void read_pipe(Probe& probe, Fd& fd) {
  char buffer[4096];
  const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    fd.reset();
    return;
  }
  const std::string_view data(buffer, static_cast<std::size_t>(n));
  if (&fd == &probe.err) {
    probe.err_tail.feed(data);
    return;
  }
  probe.out_pending.append(data);
  std::size_t newline;
  while ((newline = probe.out_pending.find('\n')) != std::string::npos) {
    handle_reply(probe, std::string_view(probe.out_pending).substr(0, newline));
    probe.out_pending.erase(0, newline + 1);
  }
}

class Preflight {
 public:
  Preflight(const PreflightSpec& spec, SignalChannel& signals, int& stop_signal)
      : spec_(spec), signals_(signals), stop_signal_(stop_signal) {}

  ~Preflight() { end_probes(); }

  Status run() {
    HOOP_RETURN_IF_ERROR(start_probes());
    const auto timeout =
        std::chrono::milliseconds(static_cast<std::int64_t>(spec_.timeout_s * 1000));
    HOOP_RETURN_IF_ERROR(
        pump_until([](const Probe& p) { return p.listening || p.error || !p.out.valid(); },
                   Clock::now() + timeout));
    for (const Probe& probe : probes_) HOOP_RETURN_IF_ERROR(check_started(probe));
    for (std::size_t i = 0; i < probes_.size(); ++i) {
      std::string lines;
      for (std::size_t j = 0; j < probes_.size(); ++j) {
        if (j == i) continue;
        lines += fmt::format("peer {} {} {} {}\n", j, probes_[j].listening->first,
                             probes_[j].listening->second, probes_[j].token);
      }
      lines += "go\n";
      if (Status s = write_all(probes_[i].stdin_w.get(), lines); !s.ok()) {
        return unreachable(probes_[i], s.message());
      }
    }
    // The probes use the same timeout for their connections; this one only bounds a probe
    // that stopped answering.
    HOOP_RETURN_IF_ERROR(pump_until([](const Probe& p) { return p.done || !p.out.valid(); },
                                    Clock::now() + 2 * timeout));
    std::vector<std::string> problems;
    for (const Probe& probe : probes_) {
      if (!probe.done) {
        problems.push_back(unreachable(probe,
                                       "its probe stopped before it had connected to "
                                       "every other host")
                               .message());
      }
      for (const auto& [index, message] : probe.failures) {
        const Probe& peer = probes_.at(std::min(index, probes_.size() - 1));
        problems.push_back(
            fmt::format("preflight: host '{}' cannot connect to host '{}' at {}:{} over {}: {}",
                        probe.access->host, peer.access->host, peer.listening->first,
                        peer.listening->second, interface_text(spec_.iface), message));
      }
    }
    if (problems.empty()) return Status::success();
    std::string text = problems.front();
    for (std::size_t i = 1; i < problems.size(); ++i) text += "\nhooprun: " + problems[i];
    return io_error(std::move(text));
  }

 private:
  Status start_probes() {
    HOOP_ASSIGN_OR_RETURN(const std::string nonce, crypto::random_hex(kTokenBytes));
    const char* path_env = std::getenv("PATH");
    Fd dev_null;
    for (const HostAccess& access : spec_.hosts) {
      Probe& probe = probes_.emplace_back();
      probe.access = &access;
      probe.token = fmt::format("{}-{}", nonce, probes_.size() - 1);
      const std::vector<std::string> agent{spec_.agent_path, std::string(kProbeAgentFlag),
                                           spec_.iface, probe.token,
                                           fmt::format("{}", spec_.timeout_s)};
      std::vector<std::string> argv = command_on_host(access, spec_.ssh_env, agent, spec_.workdir);
      HOOP_ASSIGN_OR_RETURN(const std::string path,
                            find_executable(argv.front(), path_env ? path_env : ""));
      HOOP_ASSIGN_OR_RETURN(Pipe input, open_pipe());
      SpawnRequest request{path, std::move(argv), current_env_, input.read.get(),
                           signals_.original_mask()};
      HOOP_ASSIGN_OR_RETURN(ChildProcess child, spawn_process(request));
      probe.pid = child.pid;
      probe.stdin_w = std::move(input.write);
      probe.out = std::move(child.stdout_fd);
      probe.err = std::move(child.stderr_fd);
    }
    return Status::success();
  }

  Status unreachable(const Probe& probe, std::string_view why) const {
    std::string text = fmt::format("preflight: host '{}' is not reachable {}: {}",
                                   probe.access->host, describe_access(*probe.access), why);
    for (const std::string& line : probe.err_tail.lines()) text += fmt::format("\n  {}", line);
    return io_error(std::move(text));
  }

  Status check_started(const Probe& probe) const {
    if (probe.error) {
      return invalid_argument(
          fmt::format("preflight: on host '{}': {}", probe.access->host, *probe.error));
    }
    if (probe.listening) return Status::success();
    if (probe.out.valid()) {
      return unreachable(probe, fmt::format("hooprun's probe ({}) did not answer within {} s",
                                            spec_.agent_path, spec_.timeout_s));
    }
    return unreachable(probe, fmt::format("hooprun's probe ({}) could not be started there; "
                                          "its output:",
                                          spec_.agent_path));
  }

  template <typename Done>
  Status pump_until(Done done, Clock::time_point deadline) {
    while (true) {
      if (std::all_of(probes_.begin(), probes_.end(), [&](const Probe& p) { return done(p); })) {
        return Status::success();
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return Status::success();
      std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
      std::vector<std::pair<Probe*, Fd*>> owners{{nullptr, nullptr}};
      for (Probe& probe : probes_) {
        for (Fd* fd : {&probe.out, &probe.err}) {
          if (!fd->valid()) continue;
          fds.push_back({fd->get(), POLLIN, 0});
          owners.emplace_back(&probe, fd);
        }
      }
      if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0) {
        if (errno == EINTR) continue;
        return errno_error("poll", errno);
      }
      if (fds[0].revents != 0) HOOP_RETURN_IF_ERROR(check_signals());
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) read_pipe(*owners[i].first, *owners[i].second);
      }
    }
  }

  Status check_signals() {
    HOOP_ASSIGN_OR_RETURN(std::vector<int> received, signals_.drain());
    for (int signo : received) {
      if (signo == SIGCHLD) continue;
      stop_signal_ = signo;
      return aborted(fmt::format("preflight: received {}, stopping", signal_name(signo)));
    }
    return Status::success();
  }

  // Closing stdin ends a probe; one that does not end soon is killed with its group.
  void end_probes() {
    for (Probe& probe : probes_) probe.stdin_w.reset();
    const auto deadline = Clock::now() + kExitWait;
    for (Probe& probe : probes_) {
      int status = 0;
      while (true) {
        const pid_t done = ::waitpid(probe.pid, &status, WNOHANG);
        if (done != 0 && !(done < 0 && errno == EINTR)) break;
        if (Clock::now() >= deadline) {
          ::kill(-probe.pid, SIGKILL);
          while (::waitpid(probe.pid, &status, 0) < 0 && errno == EINTR) {
          }
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  const PreflightSpec& spec_;
  SignalChannel& signals_;
  int& stop_signal_;
  std::vector<std::string> current_env_ = current_environment();
  std::vector<Probe> probes_;
};

}  // namespace

bool needs_preflight(const std::vector<HostAccess>& hosts) {
  return std::any_of(hosts.begin(), hosts.end(),
                     [](const HostAccess& h) { return h.kind != HostAccess::Kind::kLocal; });
}

Status run_preflight(const PreflightSpec& spec, SignalChannel& signals, int& stop_signal) {
  return Preflight(spec, signals, stop_signal).run();
}

}  // namespace hoop::launch
