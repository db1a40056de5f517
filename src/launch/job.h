// Supervision of one job's ranks: start them, pass their output on, watch them end, and end
// them all when one fails or hooprun is told to stop.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launch/process.h"
#include "launch/rank_env.h"
#include "launch/remote.h"
#include "launch/signals.h"

namespace hoop::launch {

/// Time the ranks get to exit after the polite signal before they are sent SIGKILL.
inline constexpr std::chrono::seconds kGracePeriod{5};
/// After the first rank fails, how long the others may take to end on their own before they
/// are signalled, so that each one's log says what it saw: ranks that find the same error (a
/// bad argument) all report it, and so do both sides of a partition, which notice it up to a
/// heartbeat apart (the runtime's heartbeats are at most 1 s apart). It ends as soon as every
/// rank has ended; only a rank that would not end (stopped, hung) costs the whole window.
inline constexpr std::chrono::seconds kReportWindow{2};
/// How long before the failure that ends a job another rank's death by a signal still counts as
/// its root cause (the survivors take up to HOOP_TIMEOUT_SECONDS to notice only when the dead
/// rank was idle; a pidfd or a closed connection tells them within milliseconds).
inline constexpr std::chrono::seconds kRootCauseWindow{2};
/// Time after SIGKILL after which output pipes still held open (by processes that left
/// the ranks' process groups) are abandoned so that hooprun can exit.
inline constexpr std::chrono::seconds kAbandonPipesAfter{2};

/// Lines of a failed rank's stderr that hooprun's final message repeats.
inline constexpr std::size_t kReportedErrorLines = 10;

/// What one rank executes.
struct RankCommand {
  std::string program_path;       // the resolved argv[0]
  std::vector<std::string> argv;  // argv[0] as written (by the user, or the spawner template)
  /// Set for a rank started over ssh: argv is then ssh's, built when the rank starts (its
  /// environment goes on the remote command line, its secret on ssh's stdin), and this is
  /// what runs remotely (hooprun's rank agent and the program).
  std::optional<std::vector<std::string>> remote_argv;
  HostAccess access;
};

struct JobSpec {
  std::vector<RankCommand> commands;       // one per rank
  std::vector<std::string> hosts;          // the hosts by cross rank, to name ranks in messages
  JobEnv env;                              // env.size is the number of ranks
  std::vector<std::string> inherited_env;  // hooprun's own environment
  /// Variables that ranks started over ssh get besides HOOP_*, HOROVOD_*, PATH, ... (-x).
  std::vector<std::string> forwarded_names;
  std::string workdir;  // where ranks started over ssh run
  /// --output-filename: each rank's output also goes to output_dir/rank.N/{stdout,stderr}.
  std::optional<std::string> output_dir;
  bool verbose = false;
};

/// One process hooprun starts and watches: a rank of a fixed job or an elastic worker.
struct WorkerSpec {
  const RankCommand* command = nullptr;  // how it starts; outlives the worker
  std::vector<std::string> env;          // its complete environment
  std::string label;                     // its output's "[label] " prefix and rank.LABEL dir
  std::string name;                      // "rank 3", for messages
  std::string host;
  bool name_host = false;  // messages say "rank 3 on host-b" (a job across hosts)
  std::string detail;      // -v: what hooprun gave it (its HOOP_* variables), after its name
};

/// What a JobDriver may do with the job's workers.
class JobControl {
 public:
  virtual ~JobControl() = default;
  /// Starts a worker; returns its index (0, 1, ... in start order).
  virtual Result<int> start_worker(WorkerSpec spec) = 0;
  /// Ends a worker: SIGTERM to its process group, SIGKILL after kGracePeriod.
  virtual void stop_worker(int worker) = 0;
  /// Ends the job with `exit_code`; `failed_worker` is the one whose failure the final message
  /// reports. Only the first call counts.
  virtual void end_job(int exit_code, std::optional<int> failed_worker) = 0;
  /// Writes "hooprun: MESSAGE" to stderr.
  virtual void say(std::string_view message) = 0;
  virtual bool verbose() const = 0;
};

/// Decides which workers a job runs: a fixed set of ranks (run_job), or an elastic job whose
/// workers change (elastic.h).
class JobDriver {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~JobDriver() = default;
  /// Starts the first workers.
  virtual void start(JobControl& job) = 0;
  /// A worker ended while the job was running.
  virtual void on_exit(JobControl& job, int worker, const ExitStatus& status) = 0;
  /// When tick() is due next; none: never.
  virtual std::optional<Clock::time_point> next_tick() const { return std::nullopt; }
  virtual void tick(JobControl&) {}
  /// True while the job goes on with no worker running (an elastic job waiting for hosts).
  virtual bool waiting() const { return false; }
};

/// Supervises the workers `driver` starts until every one has ended and their output has been
/// passed on; returns hooprun's exit code (as run_job). --output-filename, verbosity and the
/// environment come from `spec`; its commands and env are the driver's business.
int supervise(const JobSpec& spec, JobDriver& driver, SignalChannel& signals);

/// Starts the ranks and supervises them until every one has ended and their output has been
/// passed on. Returns hooprun's exit code: 0 when all ranks exit 0; else the first failing
/// rank's code (128 + signal when it was killed); 128 + S when hooprun got signal S first;
/// 127 or 126 when a rank could not be executed. Every message goes to stderr; when a rank
/// failed, the last one names its host, its exit code or signal and repeats the last
/// kReportedErrorLines lines of its stderr.
int run_job(const JobSpec& spec, SignalChannel& signals);

}  // namespace hoop::launch
