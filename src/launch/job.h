// Supervision of one job's ranks: start them, pass their output on, watch them end, and end
// them all when one fails or hooprun is told to stop.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launch/rank_env.h"
#include "launch/remote.h"
#include "launch/signals.h"

namespace hoop::launch {

/// Time the ranks get to exit after the polite signal before they are sent SIGKILL.
inline constexpr std::chrono::seconds kGracePeriod{5};
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

/// Starts the ranks and supervises them until every one has ended and their output has been
/// passed on. Returns hooprun's exit code: 0 when all ranks exit 0; else the first failing
/// rank's code (128 + signal when it was killed); 128 + S when hooprun got signal S first;
/// 127 or 126 when a rank could not be executed. Every message goes to stderr; when a rank
/// failed, the last one names its host, its exit code or signal and repeats the last
/// kReportedErrorLines lines of its stderr.
int run_job(const JobSpec& spec, SignalChannel& signals);

}  // namespace hoop::launch
