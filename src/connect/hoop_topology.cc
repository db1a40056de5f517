// hoop-topology: shows where the ranks of a job run. Every rank finds its host id and hardware
// and publishes them through the rendezvous store; rank 0 prints the summary (hosts, ranks,
// hardware, transports, ring). Every rank also checks the launcher's local/cross layout
// against the discovered one, since a wrong HOOP_LOCAL_RANK silently breaks shm and GPU choice.
//
//   build/bin/hooprun -np 2 build/bin/hoop-topology
//   build/bin/hoop-topology              (one rank, no store)
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "connect/connect.h"
#include "core/config.h"
#include "hoop/rendezvous.h"
#include "hoop/version.h"
#include "topology/topology.h"

namespace hoop::topology {
namespace {

constexpr std::string_view kUsage =
    "usage: hoop-topology\n"
    "Run by every rank of a job (hooprun -np N hoop-topology); rank 0 prints the hosts, their\n"
    "hardware, the transport between ranks and the ring order. Alone it describes this host.\n";

// A rank's published value: its host id, a newline, then encode_hardware's text.
struct RankInfo {
  std::string host_id;
  HostHardware hardware;
};

Result<RankInfo> parse_rank_value(int rank, std::string_view value) {
  const std::size_t nl = value.find('\n');
  if (nl == std::string_view::npos || nl == 0)
    return invalid_argument(fmt::format("rank {} published no host id", rank));
  auto hw = decode_hardware(value.substr(nl + 1));
  if (!hw.ok()) return hw.status().with_context(fmt::format("rank {}", rank));
  return RankInfo{std::string(value.substr(0, nl)), std::move(*hw)};
}

// Lines naming each layout field where the launcher and the host ids disagree.
std::vector<std::string> launcher_disagreements(const BootstrapInfo& info, const Layout& layout) {
  struct Field {
    std::string_view what, var;
    int launcher, discovered;
  };
  const int r = info.rank;
  const Field fields[] = {
      {"local rank", "HOOP_LOCAL_RANK", info.local_rank, layout.local_rank(r)},
      {"local size", "HOOP_LOCAL_SIZE", info.local_size, layout.local_size(r)},
      {"cross rank", "HOOP_CROSS_RANK", info.cross_rank, layout.cross_rank(r)},
      {"cross size", "HOOP_CROSS_SIZE", info.cross_size, layout.cross_size()},
  };
  std::vector<std::string> lines;
  for (const Field& f : fields) {
    if (f.launcher == f.discovered) continue;
    // Other launchers' variables have other names; HOOP_* names only what hooprun set.
    const bool hoop_vars = info.launcher == "env" || info.launcher == "hooprun";
    const std::string var = hoop_vars ? fmt::format(" ({})", f.var) : "";
    lines.push_back(fmt::format(
        "hoop-topology: warning: rank {}: the launcher ({}) gives {} {}{} but the host ids give {}",
        r, info.launcher, f.what, f.launcher, var, f.discovered));
  }
  return lines;
}

Status run() {
  HOOP_ASSIGN_OR_RETURN(BootstrapInfo info, bootstrap_from_env());
  HOOP_ASSIGN_OR_RETURN(std::string host_id, local_host_id());
  HOOP_ASSIGN_OR_RETURN(HostHardware hw, discover_hardware());
  HOOP_ASSIGN_OR_RETURN(std::string choice, config::get_string("HOOP_TRANSPORT"));
  const std::string mine = host_id + "\n" + encode_hardware(hw);

  std::vector<std::string> values{mine};
  if (!info.store_host.empty()) {
    HOOP_ASSIGN_OR_RETURN(auto store, connect_store(info));
    HOOP_ASSIGN_OR_RETURN(
        values, exchange(*store, info.rank, info.size, "hoop/topology", mine, info.timeout));
  }
  std::vector<RankInfo> ranks;
  std::vector<std::string> ids;
  for (int r = 0; r < static_cast<int>(values.size()); ++r) {
    HOOP_ASSIGN_OR_RETURN(RankInfo ri, parse_rank_value(r, values[r]));
    ids.push_back(ri.host_id);
    ranks.push_back(std::move(ri));
  }
  const Layout layout = group_by_host(ids);

  for (const std::string& line : launcher_disagreements(info, layout))
    std::fprintf(stderr, "%s\n", line.c_str());
  if (info.rank == 0) {
    std::vector<HostHardware> hardware;
    for (const auto& host : layout.host_ranks) hardware.push_back(ranks[host.front()].hardware);
    const std::string text = summary(layout, hardware, choice, connect::pair_rule(choice));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  return Status::success();
}

}  // namespace
}  // namespace hoop::topology

int main(int argc, char** argv) {
  if (argc > 1) {
    const std::string_view arg = argv[1];
    if (arg == "--version") {
      std::puts(hoop::version_line("hoop-topology").c_str());
      return 0;
    }
    const bool help = arg == "-h" || arg == "--help";
    std::fputs(hoop::topology::kUsage.data(), help ? stdout : stderr);
    return help ? 0 : 2;
  }
  try {
    const hoop::Status status = hoop::topology::run();
    if (status.ok()) return 0;
    std::fprintf(stderr, "hoop-topology: %s\n", status.to_string().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hoop-topology: %s\n", e.what());
  }
  return 1;
}
