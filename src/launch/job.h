// Supervision of one job's ranks: start them, pass their output on, watch them end, and end
// them all when one fails or hooprun is told to stop.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launch/rank_env.h"
#include "launch/signals.h"

namespace hoop::launch {

/// Time the ranks get to exit after the polite signal before they are sent SIGKILL.
inline constexpr std::chrono::seconds kGracePeriod{5};
/// Time after SIGKILL after which output pipes still held open (by processes that left
/// the ranks' process groups) are abandoned so that hooprun can exit.
inline constexpr std::chrono::seconds kAbandonPipesAfter{2};

/// What one rank executes.
struct RankCommand {
  std::string program_path;       // the resolved argv[0]
  std::vector<std::string> argv;  // argv[0] as written (by the user, or the spawner template)
};

struct JobSpec {
  std::vector<RankCommand> commands;       // one per rank
  std::vector<std::string> hosts;          // the hosts by cross rank, to name ranks in messages
  JobEnv env;                              // env.size is the number of ranks
  std::vector<std::string> inherited_env;  // hooprun's own environment
  bool verbose = false;
};

/// Starts the ranks and supervises them until every one has ended and their output has been
/// passed on. Returns hooprun's exit code: 0 when all ranks exit 0; else the first failing
/// rank's code (128 + signal when it was killed); 128 + S when hooprun got signal S first;
/// 127 or 126 when a rank could not be executed. Every message goes to stderr.
int run_job(const JobSpec& spec, SignalChannel& signals);

}  // namespace hoop::launch
