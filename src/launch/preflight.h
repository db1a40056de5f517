// The checks before a job across hosts starts: every host is reachable the way its ranks will
// be started, and every pair of hosts connects over the network interface the ranks will bind.
#pragma once

#include <string>
#include <vector>

#include "hoop/core.h"
#include "launch/remote.h"
#include "launch/signals.h"

namespace hoop::launch {

struct PreflightSpec {
  std::vector<HostAccess> hosts;     // the job's hosts, in cross-rank order
  std::string agent_path;            // hooprun itself, expected at this path on every host
  std::string iface;                 // --network-interface; empty: the transport's default
  double timeout_s = 30;             // for the probes to start, and again for the connections
  std::string workdir;               // where probes started over ssh run
  std::vector<std::string> ssh_env;  // NAME=value entries for probes started over ssh
};

/// Whether the job needs the preflight: some host is not this machine.
bool needs_preflight(const std::vector<HostAccess>& hosts);

/// Starts a probe (agent.h) on every host, in parallel, then has each connect to every other.
/// Errors name the host that could not be reached and how (its ssh or spawner output), or
/// both hosts, the interface and the address tried; aborted (naming the signal, which is also
/// stored in `stop_signal`) when hooprun is told to stop meanwhile. Every probe has ended when
/// this returns.
Status run_preflight(const PreflightSpec& spec, SignalChannel& signals, int& stop_signal);

}  // namespace hoop::launch
