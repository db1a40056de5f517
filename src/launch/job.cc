#include "launch/job.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <deque>
#include <filesystem>
#include <optional>

#include "launch/exit_codes.h"
#include "launch/hosts.h"
#include "launch/output.h"
#include "launch/process.h"

namespace hoop::launch {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunkBytes = std::size_t{64} << 10;
constexpr std::size_t kDrainLimitBytes = std::size_t{1} << 20;

// One of a rank's two output pipes and where its lines go.
struct Stream {
  Fd fd;
  LinePrefixer prefixer;
  int destination;
  Fd file;  // --output-filename's copy, when asked for
};

struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool exited = false;
  Clock::time_point ended;  // when hooprun saw it end
  ExitStatus status;
  std::string name;        // in messages: "rank 3" or "rank 3 on host-b"
  std::string short_name;  // "rank 3"
  std::string label;       // its output's prefix, without the brackets
  std::string host;
  std::vector<std::string> argv;
  bool stop_requested = false;                   // by the driver: its end is no failure
  std::optional<int> stopped_by;                 // stopped (by this signal, 0: unknown) when
                                                 // the job failed around it
  std::optional<Clock::time_point> kill_at;      // SIGKILL then, unless it has ended
  std::array<std::optional<Stream>, 2> streams;  // stdout, stderr
  TailLines stderr_tail{kReportedErrorLines};
  Fd secret_pipe;  // a rank over ssh: its stdin, held open while it runs (see agent.h)
};

constexpr const char* kStreamNames[] = {"stdout", "stderr"};

enum class Phase {
  kRunning,   // waiting for the ranks to end
  kStopping,  // the ranks were signalled; SIGKILL at kill_deadline_
  kKilled,    // SIGKILL sent; open pipes are abandoned at abandon_deadline_
};

class Supervisor final : public JobControl {
 public:
  Supervisor(const JobSpec& spec, JobDriver& driver, SignalChannel& signals)
      : spec_(spec), driver_(driver), signals_(signals) {}

  int run() {
    dev_null_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!dev_null_.valid()) {
      say(errno_error("open /dev/null", errno).message());
      return kExitFailure;
    }
    driver_.start(*this);
    while (!finished()) {
      if (Status s = wait_for_events(); !s.ok()) {
        // Without the event loop nothing can be supervised; take everything down rather
        // than leave ranks without a parent watching them.
        say(fmt::format("internal error: {}", s.to_string()));
        exit_code_ = exit_code_.value_or(kExitFailure);
        kill_all();
        wait_for_leaders();
        break;
      }
    }
    for (Rank& rank : ranks_) close_streams(rank);
    reap_all();
    if (failed_rank_) report_failure(ranks_.at(root_cause()));
    return exit_code_.value_or(kExitSuccess);
  }

 private:
  void say(std::string_view message) override {
    (void)write_all(STDERR_FILENO, fmt::format("hooprun: {}\n", message));
  }

  bool verbose() const override { return spec_.verbose; }

  Result<int> start_worker(WorkerSpec spec) override {
    const RankCommand& command = *spec.command;
    std::vector<std::string> env = std::move(spec.env);
    std::vector<std::string> argv = command.argv;
    std::array<Fd, 2> files;
    if (spec_.output_dir) {
      HOOP_ASSIGN_OR_RETURN(files, open_output_files(spec.label));
    }
    Pipe secret;
    if (command.remote_argv) {
      argv = command_on_host(command.access, ssh_environment(env, spec_.forwarded_names),
                             *command.remote_argv, spec_.workdir);
      // The secret reaches the remote agent on ssh's stdin only; ssh itself needs none of it.
      const std::string secret_entry = std::string(kSecretVar) + "=";
      std::erase_if(env, [&](const std::string& e) { return e.starts_with(secret_entry); });
      HOOP_ASSIGN_OR_RETURN(secret, open_pipe());
      // A fresh pipe holds far more than one line: this cannot block.
      HOOP_RETURN_IF_ERROR(write_all(secret.write.get(), spec_.env.secret + "\n"));
    }
    SpawnRequest request{command.program_path, argv, std::move(env),
                         secret.read.valid() ? secret.read.get() : dev_null_.get(),
                         signals_.original_mask()};
    HOOP_ASSIGN_OR_RETURN(ChildProcess child, spawn_process(request));
    Rank& rank = ranks_.emplace_back();
    rank.index = static_cast<int>(ranks_.size()) - 1;
    rank.pid = child.pid;
    rank.name = spec.name_host ? fmt::format("{} on {}", spec.name, spec.host) : spec.name;
    rank.short_name = std::move(spec.name);
    rank.label = spec.label;
    rank.host = std::move(spec.host);
    rank.argv = std::move(argv);
    rank.secret_pipe = std::move(secret.write);
    const std::string prefix = fmt::format("[{}] ", spec.label);
    rank.streams[0].emplace(Stream{std::move(child.stdout_fd), LinePrefixer(prefix), STDOUT_FILENO,
                                   std::move(files[0])});
    rank.streams[1].emplace(Stream{std::move(child.stderr_fd), LinePrefixer(prefix), STDERR_FILENO,
                                   std::move(files[1])});
    if (spec_.verbose) {
      say(fmt::format("{} (pid {}):{} {}", rank.name, rank.pid, spec.detail,
                      format_command(rank.argv)));
    }
    return rank.index;
  }

  void stop_worker(int worker) override {
    Rank& rank = ranks_.at(static_cast<std::size_t>(worker));
    if (rank.exited || rank.stop_requested) return;
    rank.stop_requested = true;
    rank.kill_at = Clock::now() + kGracePeriod;
    ::kill(-rank.pid, SIGTERM);
    if (stopped_by(rank.pid)) ::kill(-rank.pid, SIGCONT);  // else SIGTERM waits for a SIGCONT
  }

  void end_job(int exit_code, std::optional<int> failed_worker) override {
    if (exit_code_) return;
    exit_code_ = exit_code;
    if (failed_worker) failed_rank_ = static_cast<std::size_t>(*failed_worker);
    const int others = running_count();
    if (spec_.verbose && failed_worker && others > 0) {
      say(fmt::format("stopping the other {} rank{}", others, others == 1 ? "" : "s"));
    }
    if (phase_ != Phase::kRunning) return;
    if (failed_worker && others > 0) {
      settle_until_ = Clock::now() + kReportWindow;  // check_deadlines() signals them then
    } else {
      begin_stop(SIGTERM);
    }
  }

  // DIR/rank.LABEL/stdout and DIR/rank.LABEL/stderr, created or truncated.
  Result<std::array<Fd, 2>> open_output_files(const std::string& label) const {
    const std::filesystem::path dir =
        std::filesystem::path(*spec_.output_dir) / fmt::format("rank.{}", label);
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) {
      return io_error(
          fmt::format("--output-filename: cannot create '{}': {}", dir.string(), error.message()));
    }
    std::array<Fd, 2> files;
    for (int which = 0; which < 2; ++which) {
      const std::string path = (dir / kStreamNames[which]).string();
      files[which].reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (!files[which].valid()) {
        return errno_error(fmt::format("--output-filename: cannot open '{}'", path), errno);
      }
    }
    return files;
  }

  // The rank the closing line is about: the first that a signal ended on its own (killed,
  // OOM-killed, crashed) around the failure that ended the job, since the ranks that exited
  // with a code were most likely reporting its loss, whichever exit hooprun happened to see
  // first; else the rank whose failure ended the job. (An elastic job's earlier losses, long
  // recovered, are no cause of its end.)
  // A rank found stopped when the job was being ended comes next: the others failed because
  // it did not answer.
  std::size_t root_cause() const {
    const Rank& ending = ranks_.at(*failed_rank_);
    if (!ending.exited) return *failed_rank_;
    for (const std::size_t index : failed_order_) {
      const Rank& r = ranks_.at(index);
      if (r.status.signaled && r.ended + kRootCauseWindow >= ending.ended) return index;
    }
    for (const Rank& r : ranks_)
      if (r.stopped_by) return static_cast<std::size_t>(r.index);
    return *failed_rank_;
  }

  // How the closing line's rank ended: its exit, or that it stopped answering.
  static std::string how_it_ended(const Rank& rank) {
    if (!rank.stopped_by) return rank.status.describe();
    const std::string by =
        *rank.stopped_by > 0 ? fmt::format(" by signal {} ({})", *rank.stopped_by,
                                           signal_name(*rank.stopped_by))
                             : "";
    return fmt::format("stopped answering: it was stopped{} while the others waited for it, and "
                       "hooprun ended it",
                       by);
  }

  // The final word on a failed rank, after every other line: where it ran, how it ended, and
  // the end of its stderr, which usually says why.
  void report_failure(const Rank& rank) {
    std::string text = fmt::format("job failed: {} on host {} (pid {}) {}", rank.short_name,
                                   host_label(rank.host), rank.pid, how_it_ended(rank));
    // A stopped rank's own stderr predates its stop; the ranks that waited for it say why.
    if (!rank.stopped_by && !rank.stderr_tail.lines().empty()) {
      say(text + stderr_quote(rank));
      return;
    }
    if (!rank.stopped_by) text += "; it wrote nothing to stderr";
    // Another rank that failed on its own may say why (ranks that meet one error end together,
    // and the first to end need not be the one that explains it).
    for (const std::size_t index : failed_order_) {
      const Rank& other = ranks_.at(index);
      if (&other == &rank || other.stderr_tail.lines().empty()) continue;
      text += fmt::format("; {} on host {} (pid {}) {}{}", other.short_name, host_label(other.host),
                          other.pid, rank.stopped_by ? "" : "also ", other.status.describe());
      text += stderr_quote(other);
      break;
    }
    say(text);
  }

  // "; the last N lines of its stderr:" and the lines, prefixed with the rank's label.
  static std::string stderr_quote(const Rank& rank) {
    const std::vector<std::string> lines = rank.stderr_tail.lines();
    std::string text = fmt::format("; the last {} line{} of its stderr:", lines.size(),
                                   lines.size() == 1 ? "" : "s");
    for (const std::string& line : lines) text += fmt::format("\n  [{}] {}", rank.label, line);
    return text;
  }

  bool all_exited() const {
    return std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.exited; });
  }

  int running_count() const {
    return static_cast<int>(
        std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return !r.exited; }));
  }

  bool any_stream_open() const {
    for (const Rank& rank : ranks_) {
      for (const auto& stream : rank.streams) {
        if (stream) return true;
      }
    }
    return false;
  }

  bool finished() const {
    return all_exited() && !any_stream_open() && (phase_ != Phase::kRunning || !driver_.waiting());
  }

  // One round of the event loop: waits for a signal, output or the next deadline.
  Status wait_for_events() {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<std::pair<Rank*, int>> owners{{nullptr, 0}};
    for (Rank& rank : ranks_) {
      for (int s = 0; s < 2; ++s) {
        if (!rank.streams[s]) continue;
        fds.push_back({rank.streams[s]->fd.get(), POLLIN, 0});
        owners.emplace_back(&rank, s);
      }
    }
    if (::poll(fds.data(), fds.size(), poll_timeout_ms()) < 0) {
      if (errno == EINTR) return Status::success();
      return errno_error("poll", errno);
    }
    if (fds[0].revents != 0) HOOP_RETURN_IF_ERROR(handle_signals());
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) (void)read_stream(*owners[i].first, owners[i].second);
    }
    check_deadlines();
    // Once every rank has ended, whatever they left behind in their process groups goes too;
    // until then it may hold the output pipes open.
    if (phase_ == Phase::kRunning && all_exited() && !driver_.waiting()) begin_stop(SIGTERM);
    return Status::success();
  }

  int poll_timeout_ms() const {
    std::optional<Clock::time_point> deadline;
    auto earliest = [&](std::optional<Clock::time_point> t) {
      if (t && (!deadline || *t < *deadline)) deadline = t;
    };
    if (phase_ == Phase::kStopping) deadline = kill_deadline_;
    if (phase_ == Phase::kKilled && all_exited()) deadline = abandon_deadline_;
    if (phase_ == Phase::kRunning) {
      earliest(settle_until_);
      earliest(driver_.next_tick());
      for (const Rank& rank : ranks_) {
        if (!rank.exited) earliest(rank.kill_at);
      }
    }
    if (!deadline) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
    return static_cast<int>(std::max<std::int64_t>(left.count(), 0));
  }

  Status handle_signals() {
    HOOP_ASSIGN_OR_RETURN(std::vector<int> received, signals_.drain());
    for (int signo : received) {
      if (signo == SIGCHLD) {
        check_exits();
      } else {
        on_stop_signal(signo);
      }
    }
    return Status::success();
  }

  void on_stop_signal(int signo) {
    const int running = running_count();
    if (phase_ == Phase::kRunning) {
      say(fmt::format("received {}, stopping {} rank{}", signal_name(signo), running,
                      running == 1 ? "" : "s"));
      exit_code_ = kExitSignalBase + signo;
      begin_stop(signo);
      return;
    }
    if (phase_ == Phase::kStopping) {
      // Asked twice: the user does not want to wait for the grace period.
      if (running > 0) {
        say(fmt::format("received {} while stopping, killing {} rank{}", signal_name(signo),
                        running, running == 1 ? "" : "s"));
      }
      exit_code_ = exit_code_.value_or(kExitSignalBase + signo);
      kill_all();
    }
  }

  // Looks at the ranks without reaping them: a zombie keeps its pid, and so its process
  // group id, reserved, so that signalling the group can never hit an unrelated process.
  void check_exits() {
    // By index: on_rank_exit may start workers, which a range-for's iterators would not survive.
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      Rank& rank = ranks_[i];
      if (rank.exited) continue;
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(rank.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
        continue;
      }
      if (info.si_pid == 0) continue;
      rank.exited = true;
      rank.ended = Clock::now();
      rank.status.signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
      rank.status.value = info.si_status;
      drain_streams(rank);
      rank.secret_pipe.reset();
      on_rank_exit(rank);
    }
  }

  void on_rank_exit(const Rank& rank) {
    const std::string what =
        fmt::format("{} (pid {}) {}", rank.name, rank.pid, rank.status.describe());
    // Failed on its own (not stopped by hooprun or the driver), in the order they ended.
    if (phase_ == Phase::kRunning && !rank.stop_requested && !rank.status.success())
      failed_order_.push_back(static_cast<std::size_t>(rank.index));
    if (phase_ != Phase::kRunning || rank.stop_requested || rank.status.success()) {
      if (spec_.verbose) say(what);
    } else {
      say(what);
    }
    if (phase_ == Phase::kRunning) driver_.on_exit(*this, rank.index, rank.status);
  }

  void signal_groups(int signo) {
    for (const Rank& rank : ranks_) ::kill(-rank.pid, signo);
  }

  void begin_stop(int signo) {
    phase_ = Phase::kStopping;
    kill_deadline_ = Clock::now() + kGracePeriod;
    signal_groups(signo);
    // A stopped rank acts on no signal but SIGKILL until it is continued: it ends now, as the
    // others do, rather than after the grace period.
    for (const Rank& rank : ranks_)
      if (!rank.exited && stopped_by(rank.pid)) ::kill(-rank.pid, SIGCONT);
  }

  // The ranks still running when the report window closed that were stopped (SIGSTOP, a
  // debugger): the survivors reported them as not answering, and the closing line names them.
  void note_stopped_ranks() {
    for (Rank& rank : ranks_)
      if (!rank.exited && !rank.stop_requested) rank.stopped_by = stopped_by(rank.pid);
  }

  void kill_all() {
    phase_ = Phase::kKilled;
    abandon_deadline_ = Clock::now() + kAbandonPipesAfter;
    signal_groups(SIGKILL);
  }

  void check_deadlines() {
    const auto now = Clock::now();
    if (phase_ == Phase::kRunning) {
      for (Rank& rank : ranks_) {
        if (rank.exited || !rank.kill_at || now < *rank.kill_at) continue;
        rank.kill_at.reset();
        ::kill(-rank.pid, SIGKILL);
      }
      if (const auto tick = driver_.next_tick(); tick && now >= *tick) driver_.tick(*this);
      if (phase_ == Phase::kRunning && settle_until_ && (now >= *settle_until_ || all_exited())) {
        note_stopped_ranks();
        begin_stop(SIGTERM);
      }
    }
    if (phase_ == Phase::kStopping && now >= kill_deadline_) {
      if (const int running = running_count(); running > 0) {
        say(fmt::format("{} rank{} still running after {} s, sending SIGKILL", running,
                        running == 1 ? "" : "s", kGracePeriod.count()));
      }
      kill_all();
    } else if (phase_ == Phase::kKilled && all_exited() && now >= abandon_deadline_ &&
               any_stream_open()) {
      if (spec_.verbose) say("output pipes held open by processes outside the job; closing them");
      for (Rank& rank : ranks_) close_streams(rank);
    }
  }

  // Passes on one read's worth of a rank's output; returns the number of bytes read (0 when
  // nothing was waiting or the stream has ended).
  std::size_t read_stream(Rank& rank, int which) {
    if (!rank.streams[which]) return 0;
    Stream& stream = *rank.streams[which];
    std::array<char, kReadChunkBytes> buffer;
    const ssize_t n = ::read(stream.fd.get(), buffer.data(), buffer.size());
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (n > 0) {
      const std::string_view data(buffer.data(), static_cast<std::size_t>(n));
      if (which == 1) rank.stderr_tail.feed(data);
      // A full disk must not stop the job; the terminal still gets every line.
      if (stream.file.valid() && !write_all(stream.file.get(), data).ok()) stream.file.reset();
      emit(stream.destination, stream.prefixer.feed(data));
      return data.size();
    }
    emit(stream.destination, stream.prefixer.finish());
    rank.streams[which].reset();
    return 0;
  }

  // Passes on what an ended rank left in its pipes, so that its last words (a traceback)
  // come before hooprun's message about it. Bounded: a process that inherited the pipe may
  // still be writing.
  void drain_streams(Rank& rank) {
    for (int which = 0; which < 2; ++which) {
      std::size_t total = 0;
      while (total < kDrainLimitBytes) {
        const std::size_t n = read_stream(rank, which);
        if (n == 0) break;
        total += n;
      }
    }
  }

  // Passes text on to hooprun's stdout or stderr. When that is a closed pipe, the ranks'
  // pipes to it are closed too: their next write fails as it would had they written there
  // directly (SIGPIPE), rather than running on with their output thrown away.
  void emit(int destination, std::string_view text) {
    if (text.empty() || broken_[destination]) return;
    if (write_all(destination, text).ok()) return;
    broken_[destination] = true;
    for (Rank& rank : ranks_) {
      for (auto& stream : rank.streams) {
        if (stream && stream->destination == destination) stream.reset();
      }
    }
  }

  void close_streams(Rank& rank) {
    for (auto& stream : rank.streams) {
      if (!stream) continue;
      emit(stream->destination, stream->prefixer.finish());
      stream.reset();
    }
  }

  // Blocks until every leader has ended (after SIGKILL that is a matter of moments).
  void wait_for_leaders() {
    for (Rank& rank : ranks_) {
      if (rank.exited) continue;
      siginfo_t info{};
      while (::waitid(P_PID, static_cast<id_t>(rank.pid), &info, WEXITED | WNOWAIT) != 0 &&
             errno == EINTR) {
      }
      rank.exited = true;
    }
  }

  void reap_all() {
    for (const Rank& rank : ranks_) {
      int status = 0;
      while (::waitpid(rank.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

  const JobSpec& spec_;
  JobDriver& driver_;
  SignalChannel& signals_;
  Fd dev_null_;
  // A deque: a driver may start workers while a loop below holds a Rank (a worker's exit
  // makes an elastic job start others), and a deque's push_back moves no element.
  std::deque<Rank> ranks_;
  Phase phase_ = Phase::kRunning;
  std::optional<Clock::time_point> settle_until_;  // a rank failed: the others are stopped then
  std::vector<std::size_t> failed_order_;          // ranks that failed on their own, in order
  Clock::time_point kill_deadline_;
  Clock::time_point abandon_deadline_;
  std::optional<int> exit_code_;            // set by the first cause that ends the job
  std::optional<std::size_t> failed_rank_;  // the rank whose failure ended the job
  bool broken_[3] = {false, false, false};
};

int exit_code_for(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
      return kExitNotFound;
    case StatusCode::kInvalidArgument:
      return kExitCannotExecute;
    default:
      return kExitFailure;
  }
}

// A fixed job: every rank starts at once, and the first to fail ends the job.
class FixedJob final : public JobDriver {
 public:
  explicit FixedJob(const JobSpec& spec) : spec_(spec) {}

  void start(JobControl& job) override {
    for (int r = 0; r < spec_.env.size; ++r) {
      WorkerSpec worker;
      worker.command = &spec_.commands.at(static_cast<std::size_t>(r));
      worker.env = rank_environment(spec_.inherited_env, spec_.env, r);
      worker.label = std::to_string(r);
      worker.host = host_of(r);
      worker.name = fmt::format("rank {}", r);
      worker.name_host = spec_.hosts.size() >= 2;
      for (const auto& [name, value] : launcher_variables(spec_.env, r)) {
        if (name != kSecretVar) worker.detail += fmt::format(" {}={}", name, value);
      }
      if (Result<int> started = job.start_worker(std::move(worker)); !started.ok()) {
        job.say(started.status().message());
        job.end_job(exit_code_for(started.status()), std::nullopt);
        return;
      }
    }
  }

  void on_exit(JobControl& job, int worker, const ExitStatus& status) override {
    if (!status.success()) job.end_job(status.shell_code(), worker);
  }

 private:
  std::string host_of(int r) const {
    if (spec_.env.places.empty() || spec_.hosts.empty()) return "localhost";
    const RankPlace& place = spec_.env.places.at(static_cast<std::size_t>(r));
    return spec_.hosts.at(static_cast<std::size_t>(place.cross_rank));
  }

  const JobSpec& spec_;
};

}  // namespace

int supervise(const JobSpec& spec, JobDriver& driver, SignalChannel& signals) {
  return Supervisor(spec, driver, signals).run();
}

int run_job(const JobSpec& spec, SignalChannel& signals) {
  FixedJob driver(spec);
  return supervise(spec, driver, signals);
}

}  // namespace hoop::launch
