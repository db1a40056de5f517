// The store's side of elastic jobs (rendezvous.h): hooprun publishes rounds, workers join them.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/log.h"
#include "hoop/rendezvous.h"
#include "rendezvous/launchers.h"

namespace hoop {
namespace {

using Clock = std::chrono::steady_clock;

// How often a worker waiting for the ranks of its round looks for a newer round.
constexpr std::chrono::milliseconds kRoundCheck{200};

constexpr std::string_view kLatestKey = "hoop/elastic/latest";

std::string round_prefix(int round) { return fmt::format("hoop/e{}", round); }

std::string round_key(int round) { return fmt::format("hoop/elastic/round/{}", round); }

std::string worker_key(int round, std::string_view id) {
  return fmt::format("hoop/elastic/worker/{}/{}", round, id);
}

std::string encode(const ElasticPlace& p) {
  return fmt::format("{} {} {} {} {} {}", p.rank, p.size, p.local_rank, p.local_size, p.cross_rank,
                     p.cross_size);
}

Result<ElasticPlace> decode(std::string_view text, std::string_view key) {
  ElasticPlace p;
  int* fields[] = {&p.rank, &p.size, &p.local_rank, &p.local_size, &p.cross_rank, &p.cross_size};
  const char* at = text.data();
  const char* end = text.data() + text.size();
  bool good = true;
  for (std::size_t i = 0; i < std::size(fields) && good; ++i) {
    if (i > 0) good = at != end && *at++ == ' ';
    const auto [next, ec] = std::from_chars(at, end, *fields[i]);
    good = good && ec == std::errc() && *fields[i] >= 0;
    at = next;
  }
  if (good && at == end && p.rank < p.size && p.local_rank < p.local_size &&
      p.cross_rank < p.cross_size)
    return p;
  return protocol_error(fmt::format("the store's {} holds '{}', not a rank layout", key, text));
}

Result<int> parse_round(std::string_view text) {
  int round = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), round);
  if (ec != std::errc() || end != text.data() + text.size() || round < 0)
    return protocol_error(fmt::format("the store's {} holds '{}', not a round", kLatestKey, text));
  return round;
}

std::chrono::milliseconds left(Clock::time_point deadline) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                  std::chrono::milliseconds(0));
}

std::string seconds(std::chrono::milliseconds ms) {
  return fmt::format("{:.3g} s (HOOP_ELASTIC_TIMEOUT)", ms.count() / 1e3);
}

std::string failed_count_key(int round) { return fmt::format("hoop/elastic/failed/{}", round); }

std::string failed_rank_key(int round, int rank) {
  return fmt::format("hoop/elastic/failed/{}/{}", round, rank);
}

}  // namespace

Status report_failed_elastic_round(Store& store, int round, int rank,
                                   std::chrono::milliseconds timeout, std::string_view cause) {
  // The rank's own key first: hooprun reads the keys once the counter says there are some.
  HOOP_RETURN_IF_ERROR(
      store.set(failed_rank_key(round, rank), fmt::format("{} {}", timeout.count(), cause)));
  return store.add(failed_count_key(round), 1).status();
}

Result<FailedElasticRound> failed_elastic_round(Store& store, int round, int size) {
  FailedElasticRound out;
  HOOP_ASSIGN_OR_RETURN(const std::int64_t reports, store.add(failed_count_key(round), 0));
  if (reports == 0) return out;
  for (int rank = 0; rank < size; ++rank) {
    Result<std::string> value = store.get(failed_rank_key(round, rank));
    if (!value.ok()) {
      if (value.status().code() == StatusCode::kNotFound) continue;
      return value.status();
    }
    const std::size_t space = value->find(' ');
    std::int64_t ms = 0;
    const auto [end, ec] = std::from_chars(value->data(), value->data() + std::min(space, value->size()), ms);
    if (ec != std::errc() || space == std::string::npos)
      return protocol_error(fmt::format("the store's {} holds '{}', not a failure report",
                                        failed_rank_key(round, rank), *value));
    out.ranks.push_back(rank);
    out.timeout = std::max(out.timeout, std::chrono::milliseconds(ms));
    if (out.cause.empty()) out.cause = value->substr(space + 1);
  }
  return out;
}

Status publish_elastic_round(Store& store, int round,
                             const std::vector<std::pair<std::string, ElasticPlace>>& workers) {
  for (const auto& [id, place] : workers)
    HOOP_RETURN_IF_ERROR(store.set(worker_key(round, id), encode(place)));
  // The newest round before the key a reset waits for: a worker woken by round_key(round)
  // must not read the round before it as the newest and join that one again.
  HOOP_RETURN_IF_ERROR(store.set(kLatestKey, std::to_string(round)));
  return store.set(round_key(round), "");
}

Result<int> latest_elastic_round(Store& store) {
  Result<std::string> latest = store.get(kLatestKey);
  if (!latest.ok()) {
    if (latest.status().code() == StatusCode::kNotFound) return -1;
    return latest.status();
  }
  return parse_round(*latest);
}

Result<bool> elastic_rank_joined(Store& store, int round, int rank) {
  BootstrapInfo info;
  info.key_prefix = round_prefix(round);
  Result<std::string> joined = store.get(rendezvous::joined_key(info, rank));
  if (joined.ok()) return true;
  if (joined.status().code() == StatusCode::kNotFound) return false;
  return joined.status();
}

Result<std::unique_ptr<Store>> join_elastic_round(BootstrapInfo& info, int min_round) {
  HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, rendezvous::open_store(info));
  const auto deadline = Clock::now() + info.elastic_timeout;
  int wanted = std::max(min_round, 0);
  while (true) {
    Status published = store->wait({round_key(wanted)}, left(deadline));
    if (published.code() == StatusCode::kTimeout)
      return timeout_error(fmt::format("elastic worker {}: hooprun published no round {} within {}",
                                       info.elastic_id, wanted, seconds(info.elastic_timeout)));
    HOOP_RETURN_IF_ERROR(published);
    HOOP_ASSIGN_OR_RETURN(const int latest, latest_elastic_round(*store));
    const int round = std::max(latest, wanted);
    const std::string key = worker_key(round, info.elastic_id);
    Result<std::string> value = store->get(key);
    if (!value.ok() && value.status().code() == StatusCode::kNotFound)
      return aborted(fmt::format("elastic worker {} is not part of round {}: hooprun removed it",
                                 info.elastic_id, round));
    HOOP_RETURN_IF_ERROR(value.status());
    HOOP_ASSIGN_OR_RETURN(const ElasticPlace place, decode(*value, key));
    info.rank = place.rank;
    info.size = place.size;
    info.local_rank = place.local_rank;
    info.local_size = place.local_size;
    info.cross_rank = place.cross_rank;
    info.cross_size = place.cross_size;
    info.elastic_round = round;
    info.key_prefix = round_prefix(round);
    log::set_rank(info.rank);
    HOOP_RETURN_IF_ERROR(store->set(rendezvous::joined_key(info, info.rank), "1"));
    // The round's ranks gather; a newer round published meanwhile (a host came or went again)
    // replaces it, and every rank of it moves on too.
    while (true) {
      const auto slice = std::min(left(deadline), kRoundCheck);
      Status joined = store->wait(rendezvous::joined_keys(info), slice);
      if (joined.ok()) {
        HOOP_LOG(kInfo, "elastic worker {} joined round {} as rank {} of {}", info.elastic_id,
                 round, info.rank, info.size);
        return store;
      }
      if (joined.code() != StatusCode::kTimeout) return joined;
      HOOP_ASSIGN_OR_RETURN(const int newest, latest_elastic_round(*store));
      if (newest > round) {
        wanted = newest;
        break;
      }
      if (left(deadline).count() == 0)
        return rendezvous::missing_ranks_error(
            *store, info, fmt::format("{} of round {}", seconds(info.elastic_timeout), round));
    }
  }
}

}  // namespace hoop
