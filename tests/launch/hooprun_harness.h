// Runs the real hooprun as a child of the test, with its stdout and stderr captured and every
// wait bounded by a deadline, plus helpers for the shell scripts the tests use as ranks.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hoop::launch::testing {

/// Generous: a deadline is there so that a broken launcher fails the test instead of hanging
/// it, never to check speed.
inline constexpr std::chrono::seconds kDeadline{60};

/// How a hooprun run ended and what it printed.
struct RunResult {
  int exit_code = -1;  // the exit code, or 128 + signal when hooprun itself was killed
  bool timed_out = false;
  std::string out;
  std::string err;
};

/// A hooprun process started by the test.
class Hooprun {
 public:
  /// Starts HOOP_TEST_BIN_DIR/hooprun with `args`. Its environment is the test's without any
  /// HOOP_* or HOROVOD_* variable, plus `extra_env` (NAME=value entries).
  static std::unique_ptr<Hooprun> start(const std::vector<std::string>& args,
                                        const std::vector<std::string>& extra_env = {});
  /// The same with the hooprun executable at `path` (a copy placed elsewhere).
  static std::unique_ptr<Hooprun> start_at(const std::string& path,
                                           const std::vector<std::string>& args,
                                           const std::vector<std::string>& extra_env = {});
  Hooprun(const Hooprun&) = delete;
  Hooprun& operator=(const Hooprun&) = delete;
  /// Kills hooprun if it still runs, so that a failed test leaves nothing behind.
  ~Hooprun();

  pid_t pid() const { return pid_; }
  /// Reads output until `done(out, err)` holds; false when the deadline passes or hooprun's
  /// output ends first.
  bool wait_for_output(const std::function<bool(const std::string&, const std::string&)>& done,
                       std::chrono::seconds deadline = kDeadline);
  /// Stops reading hooprun's stdout and closes it, as `hooprun ... | head -1` would.
  void close_stdout();
  /// Reads output until hooprun has exited and closed it; at the deadline kills hooprun and
  /// sets timed_out.
  RunResult wait(std::chrono::seconds deadline = kDeadline);

 private:
  Hooprun(pid_t pid, int out_fd, int err_fd) : pid_(pid), fds_{out_fd, err_fd} {}
  // Reads whatever arrives within `timeout_ms`; false once both pipes are closed.
  bool pump(int timeout_ms);
  bool try_reap();

  pid_t pid_;
  int fds_[2];
  std::string out_;
  std::string err_;
  std::optional<int> exit_code_;
};

/// Starts hooprun with `args` and waits for it (see Hooprun).
RunResult run_hooprun(const std::vector<std::string>& args,
                      const std::vector<std::string>& extra_env = {},
                      std::chrono::seconds deadline = kDeadline);

/// A fresh directory, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  /// path()/name.
  std::string file(std::string_view name) const;

 private:
  std::string path_;
};

/// Writes `content` to `path`, replacing it, with the given permission bits.
void write_file(const std::string& path, std::string_view content, unsigned mode = 0644);
/// The contents of `path`, or nullopt when it cannot be read.
std::optional<std::string> read_file(const std::string& path);
/// Waits until `path` holds a complete line and returns it without the newline.
std::optional<std::string> wait_for_line(const std::string& path,
                                         std::chrono::seconds deadline = kDeadline);
/// Waits until `pid` has ended (no such process, or a zombie nobody has reaped yet).
bool wait_until_gone(pid_t pid, std::chrono::seconds deadline = kDeadline);
/// `text` cut at newlines; a last line without newline counts too.
std::vector<std::string> split_lines(std::string_view text);
/// Lines of `text` that contain both `a` and `b`.
int count_lines_with(const std::string& text, const std::string& a, const std::string& b = "");
/// The job id from hooprun --verbose's "hooprun: job <id>: ..." line; empty when there is none.
std::string verbose_job_id(const std::string& err);
/// Runs `hooprun -np n binary args...` with `extra_env`.
RunResult run_ranks(const std::string& binary, int n, const std::vector<std::string>& args,
                    const std::vector<std::string>& extra_env, std::chrono::seconds deadline);

/// The command `/bin/sh -c script` as hooprun arguments after `-np n`.
std::vector<std::string> sh_job(int num_ranks, const std::string& script,
                                const std::vector<std::string>& hooprun_options = {});

/// Shell that writes the rank's pid to dir/pid.$HOOP_RANK, atomically, so that a reader
/// never sees a half-written file.
std::string sh_write_pid(const TempDir& dir);
/// Shell that waits (bounded) until dir/go exists; the test creates it to let ranks go on.
std::string sh_wait_for_go(const TempDir& dir);
/// The pids the ranks wrote with sh_write_pid, waiting for each.
std::vector<pid_t> wait_for_rank_pids(const TempDir& dir, int num_ranks);

}  // namespace hoop::launch::testing
