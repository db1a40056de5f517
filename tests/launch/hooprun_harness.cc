#include "tests/launch/hooprun_harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace hoop::launch::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<char*> to_c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::int64_t>(left.count(), 0));
}

}  // namespace

std::unique_ptr<Hooprun> Hooprun::start(const std::vector<std::string>& args,
                                        const std::vector<std::string>& extra_env) {
  return start_at(HOOP_TEST_BIN_DIR "/hooprun", args, extra_env);
}

std::unique_ptr<Hooprun> Hooprun::start_at(const std::string& path,
                                           const std::vector<std::string>& args,
                                           const std::vector<std::string>& extra_env) {
  std::vector<std::string> argv{path};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    // HOOP_FAKE_DEVICE describes the machine (the fake_device tests), not the job: it stays.
    if ((entry.starts_with("HOOP_") || entry.starts_with("HOROVOD_")) &&
        !entry.starts_with("HOOP_FAKE_DEVICE="))
      continue;
    env.emplace_back(entry);
  }
  // An extra entry replaces the inherited one of its name (getenv takes the first).
  for (const std::string& extra : extra_env) {
    const std::size_t eq = extra.find('=');
    const std::string name = extra.substr(0, eq == std::string::npos ? extra.size() : eq + 1);
    if (eq != std::string::npos)
      std::erase_if(env, [&](const std::string& e) { return e.starts_with(name); });
    env.push_back(extra);
  }

  int out[2];
  int err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    return nullptr;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  pid_t pid = -1;
  std::vector<char*> c_argv = to_c_strings(argv);
  std::vector<char*> c_env = to_c_strings(env);
  const int error = ::posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  if (error != 0) {
    ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(error);
    ::close(out[0]);
    ::close(err[0]);
    return nullptr;
  }
  return std::unique_ptr<Hooprun>(new Hooprun(pid, out[0], err[0]));
}

Hooprun::~Hooprun() {
  if (!exit_code_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

bool Hooprun::pump(int timeout_ms) {
  std::vector<pollfd> pfds;
  for (int fd : fds_) {
    if (fd >= 0) pfds.push_back({fd, POLLIN, 0});
  }
  if (pfds.empty()) return false;
  if (::poll(pfds.data(), pfds.size(), timeout_ms) <= 0) return true;
  for (const pollfd& p : pfds) {
    if (p.revents == 0) continue;
    const int which = p.fd == fds_[0] ? 0 : 1;
    char buffer[65536];
    const ssize_t n = ::read(p.fd, buffer, sizeof(buffer));
    if (n > 0) {
      (which == 0 ? out_ : err_).append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      ::close(fds_[which]);
      fds_[which] = -1;
    }
  }
  return fds_[0] >= 0 || fds_[1] >= 0;
}

bool Hooprun::try_reap() {
  if (exit_code_) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
  exit_code_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return true;
}

bool Hooprun::wait_for_output(
    const std::function<bool(const std::string&, const std::string&)>& done,
    std::chrono::seconds deadline) {
  const auto until = Clock::now() + deadline;
  while (!done(out_, err_)) {
    if (Clock::now() >= until) return false;
    if (!pump(std::min(remaining_ms(until), 100))) return done(out_, err_);
  }
  return true;
}

void Hooprun::close_stdout() {
  if (fds_[0] >= 0) ::close(fds_[0]);
  fds_[0] = -1;
}

RunResult Hooprun::wait(std::chrono::seconds deadline) {
  const auto until = Clock::now() + deadline;
  RunResult result;
  while (Clock::now() < until) {
    const bool open = pump(std::min(remaining_ms(until), 100));
    if (try_reap() && !open) break;
    if (!open) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!exit_code_ || fds_[0] >= 0 || fds_[1] >= 0) {
    result.timed_out = true;
    ::kill(pid_, SIGKILL);
    int status = 0;
    if (!exit_code_ && ::waitpid(pid_, &status, 0) == pid_) {
      exit_code_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
  }
  result.exit_code = exit_code_.value_or(-1);
  result.out = out_;
  result.err = err_;
  return result;
}

RunResult run_hooprun(const std::vector<std::string>& args,
                      const std::vector<std::string>& extra_env, std::chrono::seconds deadline) {
  std::unique_ptr<Hooprun> hooprun = Hooprun::start(args, extra_env);
  if (!hooprun) return {};
  return hooprun->wait(deadline);
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/hooprun_test.XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
  }
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::file(std::string_view name) const { return path_ + "/" + std::string(name); }

void write_file(const std::string& path, std::string_view content, unsigned mode) {
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << content;
    ASSERT_TRUE(f.good()) << "cannot write " << path;
  }
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream contents;
  contents << f.rdbuf();
  return contents.str();
}

std::optional<std::string> wait_for_line(const std::string& path, std::chrono::seconds deadline) {
  const auto until = Clock::now() + deadline;
  while (Clock::now() < until) {
    if (auto text = read_file(path); text && !text->empty() && text->back() == '\n') {
      text->pop_back();
      return text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

bool wait_until_gone(pid_t pid, std::chrono::seconds deadline) {
  if (pid <= 0) return false;  // kill() would address a whole group, or every process
  const auto until = Clock::now() + deadline;
  while (true) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    // A zombie has ended; whoever inherited it may take a while to reap it.
    if (auto stat = read_file("/proc/" + std::to_string(pid) + "/stat")) {
      const std::size_t paren = stat->rfind(')');
      if (paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] == 'Z') {
        return true;
      }
    }
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int count_lines_with(const std::string& text, const std::string& a, const std::string& b) {
  int found = 0;
  for (const std::string& line : split_lines(text))
    if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) ++found;
  return found;
}

std::string verbose_job_id(const std::string& err) {
  const std::string marker = "hooprun: job ";
  const std::size_t at = err.find(marker);
  if (at == std::string::npos) return {};
  const std::size_t start = at + marker.size();
  return err.substr(start, err.find(':', start) - start);
}

RunResult run_ranks(const std::string& binary, int n, const std::vector<std::string>& args,
                    const std::vector<std::string>& extra_env, std::chrono::seconds deadline) {
  std::vector<std::string> argv = {"-np", std::to_string(n), binary};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_hooprun(argv, extra_env, deadline);
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    lines.emplace_back(text.substr(0, newline));
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
  }
  return lines;
}

std::vector<std::string> sh_job(int num_ranks, const std::string& script,
                                const std::vector<std::string>& hooprun_options) {
  std::vector<std::string> args{"-np", std::to_string(num_ranks)};
  args.insert(args.end(), hooprun_options.begin(), hooprun_options.end());
  args.insert(args.end(), {"/bin/sh", "-c", script});
  return args;
}

std::string sh_write_pid(const TempDir& dir) {
  return "echo $$ > '" + dir.path() + "/tmp.'$HOOP_RANK && mv '" + dir.path() +
         "/tmp.'$HOOP_RANK '" + dir.path() + "/pid.'$HOOP_RANK; ";
}

std::string sh_wait_for_go(const TempDir& dir) {
  // 1200 rounds of 50 ms: the same minute as kDeadline.
  const std::string go = "'" + dir.path() + "/go'";
  return "n=0; while [ ! -e " + go + " ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done; " +
         "[ -e " + go + " ] || exit 99; ";
}

std::vector<pid_t> wait_for_rank_pids(const TempDir& dir, int num_ranks) {
  std::vector<pid_t> pids;
  for (int r = 0; r < num_ranks; ++r) {
    const std::optional<std::string> line = wait_for_line(dir.file("pid." + std::to_string(r)));
    EXPECT_TRUE(line.has_value()) << "rank " << r << " never wrote its pid";
    pids.push_back(line ? static_cast<pid_t>(std::stol(*line)) : -1);
  }
  return pids;
}

}  // namespace hoop::launch::testing
