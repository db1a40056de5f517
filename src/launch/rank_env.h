// The environment contract between hooprun and its ranks: which HOOP_* variables each rank
// gets on top of the environment it inherits from hooprun.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace hoop::launch {

/// Where one rank runs among the hosts of its job.
struct RankPlace {
  int cross_rank = 0;  // index of its host
  int local_rank = 0;  // index among its host's ranks
  int local_size = 1;  // number of ranks on its host

  bool operator==(const RankPlace&) const = default;
};

/// What is the same for every rank of one job.
struct JobEnv {
  int size = 1;
  /// One entry per rank; empty means every rank runs on one host.
  std::vector<RankPlace> places;
  int num_hosts = 1;
  std::string rendezvous_addr;
  std::uint16_t rendezvous_port = 0;
  std::string secret;
  std::string job_id;
  double start_timeout_s = 30;
  /// --network-interface, passed on as HOOP_IFACE; empty: the ranks' own HOOP_IFACE, if any.
  std::string iface;
};

/// Name of the variable that carries the job secret, the one value never shown.
inline constexpr std::string_view kSecretVar = "HOOP_SECRET";

/// The HOOP_* variables hooprun sets for `rank`, in a stable order.
std::vector<std::pair<std::string, std::string>> launcher_variables(const JobEnv& job, int rank);

/// The complete environment of `rank`: `inherited` (NAME=value entries) without the
/// variables hooprun sets or their Horovod aliases (a stale HOROVOD_RANK must not contradict
/// HOOP_RANK), followed by launcher_variables(job, rank) and the rank layout under Horovod's
/// names (HOROVOD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, _CROSS_SIZE).
std::vector<std::string> rank_environment(std::span<const std::string> inherited, const JobEnv& job,
                                          int rank);

/// The complete environment of an elastic worker named `worker_id`: `inherited` without any
/// rank layout variable (the worker finds its rank in the store, round by round), followed by
/// the store's address, the secret, the job id, the timeouts, HOOP_ELASTIC_ID and
/// HOOP_ELASTIC_TIMEOUT.
std::vector<std::string> elastic_environment(std::span<const std::string> inherited,
                                             const JobEnv& job, const std::string& worker_id,
                                             double elastic_timeout_s);

/// This process's environment as NAME=value entries.
std::vector<std::string> current_environment();

}  // namespace hoop::launch
