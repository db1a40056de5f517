// Where a job's ranks run: hooprun's host list (-H), the placement of ranks on those hosts,
// how a rank on a host is started (--spawner), and the store address ranks on every host reach.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/core.h"
#include "launch/rank_env.h"

namespace hoop::launch {

/// One entry of the host list: a host and how many ranks it may take.
struct HostSlots {
  std::string name;
  int slots = 1;

  bool operator==(const HostSlots&) const = default;
};

/// Parses horovodrun's host list, "a:2,b,c:4" ("b" alone has one slot). invalid_argument naming
/// the bad entry: an empty name, slots that are not a positive integer, a host listed twice.
Result<std::vector<HostSlots>> parse_hosts(std::string_view text);

/// Parses a hostfile's text: one host a line as `host slots=N`, `host:N` or `host` (1 slot);
/// `#` starts a comment, blank lines are skipped. invalid_argument naming `file`:line for a
/// malformed line, a host listed twice, or a file without hosts.
Result<std::vector<HostSlots>> parse_hostfile(std::string_view text, std::string_view file);

/// The lines of a hostfile (or of an elastic job's discovery script) as parse_hostfile reads
/// them, a host alone taking `default_slots`; no line at all is no host, not an error.
Result<std::vector<HostSlots>> parse_host_lines(std::string_view text, std::string_view file,
                                                int default_slots);

/// Reads and parses the hostfile at `path` (see parse_hostfile); io_error naming it when it
/// cannot be read.
Result<std::vector<HostSlots>> read_hostfile(const std::string& path);

/// The sum of the hosts' slots (saturating at INT32_MAX).
int total_slots(std::span<const HostSlots> hosts);

/// The ranks of a job laid out on its hosts.
struct Placement {
  std::vector<std::string> hosts;  // the hosts that got ranks, in the order given
  std::vector<RankPlace> ranks;    // one per rank
};

/// Fills the hosts in the order given: the first gets ranks 0..slots-1, the next the ranks
/// after those, and so on. Hosts left without a rank take no part in the job. invalid_argument
/// naming both numbers when num_ranks exceeds the slots.
Result<Placement> place_ranks(std::span<const HostSlots> hosts, int num_ranks);

/// Whether `host` names this machine: localhost, 127.0.0.1 or this machine's host name.
bool is_local_host(std::string_view host);
/// `host` as reports name it: "localhost" (hooprun's host without -H) also by this machine's
/// name, which hoop-topology and the ranks' own errors use ("localhost (vm)").
std::string host_label(const std::string& host);

/// The command prefix that starts a rank on `host`: `spawner` split at whitespace, with every
/// "{host}" replaced by the host's name. No quoting: a word cannot contain a space.
std::vector<std::string> expand_spawner(std::string_view spawner, std::string_view host);

/// The address the rendezvous store binds to and the ranks are told: `given` when set; else
/// 127.0.0.1 when every host is this machine; else the first non-loopback IPv4 address of an
/// interface that is up (not_found when there is none).
Result<std::string> choose_rendezvous_addr(const std::optional<std::string>& given,
                                           std::span<const std::string> hosts);

}  // namespace hoop::launch
