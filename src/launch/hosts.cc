#include "launch/hosts.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <set>

#include "core/socket.h"

namespace hoop::launch {
namespace {

Status bad_entry(std::string_view entry, std::string_view why) {
  return invalid_argument(fmt::format("bad host '{}' in the host list: {}", entry, why));
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
      const std::string_view slots = entry.substr(colon + 1);
      const auto [ptr, ec] = std::from_chars(slots.data(), slots.data() + slots.size(), host.slots);
      if (ec != std::errc() || ptr != slots.data() + slots.size() || host.slots < 1) {
        return bad_entry(entry, "slots must be a positive integer (host:slots)");
      }
    }
    if (host.name.empty()) return bad_entry(entry, "empty host name");
    if (!seen.insert(host.name).second) return bad_entry(entry, "host listed twice");
    hosts.push_back(std::move(host));
  }
  return hosts;
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

bool is_local_host(std::string_view host) {
  if (host == "localhost" || host == "127.0.0.1") return true;
  char name[HOST_NAME_MAX + 1] = {};
  return ::gethostname(name, sizeof name - 1) == 0 && host == name;
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
