#include "launch/hosts.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/socket.h"

namespace hoop::launch {
namespace {

Status bad_entry(std::string_view entry, std::string_view why) {
  return invalid_argument(fmt::format("bad host '{}' in the host list: {}", entry, why));
}

// A positive slot count, or nullopt.
std::optional<int> parse_slots(std::string_view text) {
  int slots = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), slots);
  if (ec != std::errc() || ptr != text.data() + text.size() || slots < 1) return std::nullopt;
  return slots;
}

// One hostfile line without its comment: "host" (default_slots), "host:N" or "host slots=N";
// nullopt and `why` when it is none of them.
std::optional<HostSlots> parse_hostfile_line(std::string_view line, int default_slots,
                                             std::string& why) {
  constexpr std::string_view kSpace = " \t\r";
  std::vector<std::string_view> words;
  for (std::size_t start = line.find_first_not_of(kSpace); start != std::string_view::npos;) {
    const std::size_t end = std::min(line.find_first_of(kSpace, start), line.size());
    words.push_back(line.substr(start, end - start));
    start = line.find_first_not_of(kSpace, end);
  }
  HostSlots host;
  std::optional<int> slots = default_slots;
  if (words.size() == 2 && words[1].starts_with("slots=")) {
    host.name = std::string(words[0]);
    slots = parse_slots(words[1].substr(6));
  } else if (words.size() == 1 && words[0].find(':') != std::string_view::npos) {
    const std::size_t colon = words[0].rfind(':');
    host.name = std::string(words[0].substr(0, colon));
    slots = parse_slots(words[0].substr(colon + 1));
  } else if (words.size() == 1) {
    host.name = std::string(words[0]);
  } else {
    why = "expected 'host slots=N', 'host:N' or 'host'";
    return std::nullopt;
  }
  if (!slots) {
    why = "slots must be a positive integer";
    return std::nullopt;
  }
  if (host.name.empty()) {
    why = "empty host name";
    return std::nullopt;
  }
  host.slots = *slots;
  return host;
}

}  // namespace

Result<std::vector<HostSlots>> parse_hosts(std::string_view text) {
  std::vector<HostSlots> hosts;
  std::set<std::string, std::less<>> seen;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view entry = text.substr(start, end - start);
    start = end + 1;
    HostSlots host;
    const std::size_t colon = entry.rfind(':');
    host.name = std::string(entry.substr(0, colon));
    if (colon != std::string_view::npos) {
      const std::optional<int> slots = parse_slots(entry.substr(colon + 1));
      if (!slots) return bad_entry(entry, "slots must be a positive integer (host:slots)");
      host.slots = *slots;
    }
    if (host.name.empty()) return bad_entry(entry, "empty host name");
    if (!seen.insert(host.name).second) return bad_entry(entry, "host listed twice");
    hosts.push_back(std::move(host));
  }
  return hosts;
}

Result<std::vector<HostSlots>> parse_host_lines(std::string_view text, std::string_view file,
                                                int default_slots) {
  std::vector<HostSlots> hosts;
  std::map<std::string, int, std::less<>> first_line;
  int number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string why;
    std::optional<HostSlots> host = parse_hostfile_line(line, default_slots, why);
    if (!host) {
      return invalid_argument(fmt::format("{}:{}: bad line '{}': {}", file, number, line, why));
    }
    if (auto [it, added] = first_line.emplace(host->name, number); !added) {
      return invalid_argument(fmt::format("{}:{}: host '{}' is listed twice (first on line {})",
                                          file, number, host->name, it->second));
    }
    hosts.push_back(std::move(*host));
  }
  return hosts;
}

Result<std::vector<HostSlots>> parse_hostfile(std::string_view text, std::string_view file) {
  HOOP_ASSIGN_OR_RETURN(std::vector<HostSlots> hosts, parse_host_lines(text, file, 1));
  if (hosts.empty()) return invalid_argument(fmt::format("{}: the hostfile lists no host", file));
  return hosts;
}

Result<std::vector<HostSlots>> read_hostfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    return io_error(fmt::format("cannot read the hostfile '{}': {}", path, std::strerror(errno)));
  }
  return parse_hostfile(text.str(), path);
}

int total_slots(std::span<const HostSlots> hosts) {
  long long total = 0;
  for (const HostSlots& host : hosts) total = std::min<long long>(total + host.slots, INT_MAX);
  return static_cast<int>(total);
}

Result<Placement> place_ranks(std::span<const HostSlots> hosts, int num_ranks) {
  const int slots = total_slots(hosts);
  if (num_ranks > slots) {
    return invalid_argument(fmt::format("-np {} exceeds the {} slot{} of the host list", num_ranks,
                                        slots, slots == 1 ? "" : "s"));
  }
  Placement placement;
  int rank = 0;
  for (const HostSlots& host : hosts) {
    if (rank == num_ranks) break;
    const int here = std::min(host.slots, num_ranks - rank);
    const int cross_rank = static_cast<int>(placement.hosts.size());
    placement.hosts.push_back(host.name);
    for (int local = 0; local < here; ++local, ++rank) {
      placement.ranks.push_back(RankPlace{cross_rank, local, here});
    }
  }
  return placement;
}

namespace {

std::string this_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

}  // namespace

bool is_local_host(std::string_view host) {
  if (host == "localhost" || host == "127.0.0.1") return true;
  const std::string name = this_host_name();
  return !name.empty() && host == name;
}

std::string host_label(const std::string& host) {
  if (host != "localhost" && host != "127.0.0.1") return host;
  const std::string name = this_host_name();
  return name.empty() ? host : fmt::format("{} ({})", host, name);
}

std::vector<std::string> expand_spawner(std::string_view spawner, std::string_view host) {
  constexpr std::string_view kPlaceholder = "{host}";
  constexpr std::string_view kSpace = " \t\n";
  std::vector<std::string> words;
  std::size_t start = spawner.find_first_not_of(kSpace);
  while (start != std::string_view::npos) {
    const std::size_t end = std::min(spawner.find_first_of(kSpace, start), spawner.size());
    std::string word(spawner.substr(start, end - start));
    for (std::size_t at = word.find(kPlaceholder); at != std::string::npos;
         at = word.find(kPlaceholder, at + host.size())) {
      word.replace(at, kPlaceholder.size(), host);
    }
    words.push_back(std::move(word));
    start = spawner.find_first_not_of(kSpace, end);
  }
  return words;
}

Result<std::string> choose_rendezvous_addr(const std::optional<std::string>& given,
                                           std::span<const std::string> hosts) {
  if (given) return *given;
  if (std::all_of(hosts.begin(), hosts.end(),
                  [](const std::string& h) { return is_local_host(h); })) {
    return std::string("127.0.0.1");
  }
  HOOP_ASSIGN_OR_RETURN(std::optional<std::string> address, net::first_external_ipv4());
  if (!address) {
    return not_found(
        "no network interface that is up has a non-loopback IPv4 address for the rendezvous "
        "store of a job across hosts; give one with --rendezvous-addr");
  }
  return *address;
}

}  // namespace hoop::launch
