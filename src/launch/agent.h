// hooprun's remote side: the same executable, started on another host over ssh (or through
// --spawner) with an internal first argument (remote.h), runs one rank or a preflight probe.
#pragma once

#include <span>
#include <string>

namespace hoop::launch {

/// Runs one rank: reads the job secret from the first line of stdin into HOOP_SECRET (so
/// that it is never on a command line), starts `command` (program and arguments) in its own
/// process group with stdin from /dev/null, passes SIGINT, SIGTERM and SIGHUP on to it, and
/// ends it (SIGTERM, then SIGKILL after a grace period) when stdin reaches its end: that is
/// when hooprun closed it, or when the ssh connection is gone. Returns the rank's exit code
/// (128 + signal when it was killed).
int run_rank_agent(std::span<const std::string> command);

/// Runs a preflight probe; `args` are the interface (empty: the transport's default), the
/// probe's token and the timeout in seconds. Protocol, one line each on stdout and stdin:
///   probe:   "hoop-probe listening ADDR PORT" (or "hoop-probe error MESSAGE" and exit 1)
///   hooprun: "peer INDEX ADDR PORT TOKEN" for every other probe, then "go"
///   probe:   "hoop-probe ok INDEX" or "hoop-probe fail INDEX MESSAGE" per peer, then
///            "hoop-probe done"; it then keeps listening until stdin ends.
/// A connection is good when the probe at the other end answers with its token.
int run_probe_agent(std::span<const std::string> args);

}  // namespace hoop::launch
