// hooprun's elastic jobs (--host-discovery-script): workers that come and go while the job
// runs. hooprun runs the discovery script every second; each time the set of workers changes
// (a worker failed, a host appeared or went) it publishes a new round in the store
// (rendezvous.h), starts the workers of new slots and stops those of hosts that are gone. The
// workers move to the new round by themselves (hoop/elastic.h).
//
// Ranks of a round: hosts in the order of their lowest rank in the previous round, new hosts
// after them in the script's order; on a host, its old workers first. So rank 0 of a round is
// always a worker of the previous one, which holds the committed state the new ones receive.
//
// A worker that fails puts its host on the blacklist, and that host's other workers are
// stopped: the host takes no part until the script has stopped listing it and lists it again
// (a replaced machine). A worker that exits 0 begins the end of the job: no round follows, and
// the job's exit code is 0 when every other worker also exits 0; workers started for a round
// that the finished worker never joined are stopped, since nothing would complete that round.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "hoop/core.h"
#include "launch/job.h"
#include "launch/options.h"
#include "launch/signals.h"

namespace hoop::launch {

/// How a worker on a host starts (the command, behind the spawner or over ssh).
using CommandFactory = std::function<Result<RankCommand>(const std::string& host)>;

/// Runs an elastic job until it ends; returns hooprun's exit code. `spec` carries the job's
/// store address, secret and id, environment, output and verbosity; its hosts, commands and
/// size are not used: the workers are started for the discovered slots, `initial_np` of them
/// first (hooprun waits up to --elastic-timeout for that many slots, and starts with what there
/// is once it reaches --min-np).
int run_elastic_job(const ElasticOptions& options, int initial_np, const JobSpec& spec,
                    const CommandFactory& command_for_host, SignalChannel& signals);

}  // namespace hoop::launch
