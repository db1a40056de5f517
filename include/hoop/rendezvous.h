/// @file
/// hoop rendezvous: an authenticated TCP key-value store, and bootstrap from the launcher's
/// environment (hooprun, mpirun, Slurm, or plain HOOP_* variables).
///
/// Every connection to the store authenticates with an HMAC-SHA256 challenge over the job
/// secret and checks the protocol version and the job id; nothing a client sends before that
/// is trusted, and every frame length is checked before anything is allocated for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/core.h"

namespace hoop {

/// Settings shared by a store server and its clients.
struct StoreOptions {
  /// The job secret; the HMAC key of the handshake. Must not be empty.
  std::string secret;
  /// Identifies the job; a client of another job is refused.
  std::string job_id;
  /// Deadline for connecting (retrying while the server is not up yet) and for each call.
  std::chrono::milliseconds timeout{30000};
  /// Largest key + value a frame may carry; bigger frames are refused before allocating.
  std::size_t max_value_bytes = std::size_t{64} << 20;
  /// Server side: a connection that has not completed the handshake within this long is
  /// dropped (and counted as a protocol error), so idle or stuck peers cannot pile up.
  std::chrono::milliseconds handshake_timeout{5000};
};

/// Counters a server keeps about the connections it refused (for logs and tests).
struct StoreServerStats {
  std::uint64_t accepted = 0;         ///< connections that passed the handshake
  std::uint64_t auth_failures = 0;    ///< wrong secret, job id or protocol version
  std::uint64_t protocol_errors = 0;  ///< garbage, oversized frames, handshake timeouts
  std::uint64_t closed = 0;           ///< accepted connections since closed (open: the difference)
};

/// The store server. Serves every client from one event-loop thread with non-blocking
/// sockets, so an idle, slow or malicious client never delays the others.
class StoreServer {
 public:
  /// Binds `bind_host:port` (port 0 picks a free port) and starts serving in the background.
  static Result<std::unique_ptr<StoreServer>> start(const std::string& bind_host,
                                                    std::uint16_t port, StoreOptions options);
  virtual ~StoreServer() = default;

  /// The port actually bound.
  virtual std::uint16_t port() const = 0;
  /// Counters of accepted and refused connections.
  virtual StoreServerStats stats() const = 0;
  /// Stops serving and closes every connection; pending waits fail on the clients. Idempotent.
  virtual void stop() = 0;
};

/// A client connection to the store. Calls are thread-safe (serialized) and each one
/// returns within the options' timeout (or the timeout given to wait).
class Store {
 public:
  /// Connects and authenticates, retrying a refused connection until options.timeout.
  /// `rank` is only used to name this client in the server's log (-1: unknown).
  static Result<std::unique_ptr<Store>> connect(const std::string& host, std::uint16_t port,
                                                StoreOptions options, int rank = -1);
  virtual ~Store() = default;

  /// Sets `key` to `value` (any bytes), replacing an earlier value.
  virtual Status set(std::string_view key, std::string_view value) = 0;
  /// The value of `key`; not_found when it is not set. Does not wait.
  virtual Result<std::string> get(std::string_view key) = 0;
  /// Waits until every key in `keys` is set; timeout_error naming the missing keys otherwise.
  virtual Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  /// Atomically adds `delta` to the integer stored at `key` (absent counts as 0) and returns
  /// the new value. Fails when the key holds something other than an add() counter.
  virtual Result<std::int64_t> add(std::string_view key, std::int64_t delta) = 0;
  /// Deletes `key`; returns whether it existed.
  virtual Result<bool> remove(std::string_view key) = 0;

  /// wait({key}, timeout) then get(key).
  Result<std::string> wait_get(std::string_view key, std::chrono::milliseconds timeout);
};

/// Where this process sits in the job and how to reach the store, as the launcher said.
struct BootstrapInfo {
  int rank = 0;        ///< this rank
  int size = 1;        ///< the number of ranks
  int local_rank = 0;  ///< this rank among the ranks of its host
  int local_size = 1;  ///< the number of ranks on this rank's host
  int cross_rank = 0;  ///< the index of this rank's host among the hosts
  int cross_size = 1;  ///< the number of hosts
  /// The store's host; empty when no store was given (single-process job).
  std::string store_host;
  std::uint16_t store_port = 0;  ///< the store's port
  std::string secret;            ///< the job secret (StoreOptions::secret)
  std::string job_id;            ///< the job's id (StoreOptions::job_id)
  /// Where the rank layout came from: "hooprun" (its HOOP_* variables, with HOOP_JOB_ID),
  /// "env" (HOOP_* or HOROVOD_* variables set otherwise),
  /// "mpirun" (OMPI_COMM_WORLD_*), "pmix" (PMIX_RANK), "slurm" (SLURM_*), "kubernetes"
  /// (JOB_COMPLETION_INDEX of an Indexed Job) or "none".
  std::string launcher;
  /// True when no hooprun hosts the store: rank 0 hosts it at store_host:store_port.
  bool host_store = false;
  /// Deadline for every rank to start and join the rendezvous (HOOP_START_TIMEOUT).
  std::chrono::milliseconds start_timeout{30000};
  /// Deadline of each store operation and each collective (HOOP_TIMEOUT_SECONDS).
  std::chrono::milliseconds timeout{30000};
  /// Where this rank's keys live in the store: "hoop", or "hoop/e<round>" in an elastic job,
  /// so that every round starts on fresh keys.
  std::string key_prefix = "hoop";
  /// An elastic worker (hooprun --host-discovery-script): its name (HOOP_ELASTIC_ID), the
  /// round it joined (-1: none yet) and how long it waits for a round (HOOP_ELASTIC_TIMEOUT).
  /// Its rank layout comes from the store, not from the environment.
  std::string elastic_id;
  int elastic_round = -1;  ///< the round this worker joined; -1: none yet
  /// How long an elastic worker waits for a round (HOOP_ELASTIC_TIMEOUT).
  std::chrono::milliseconds elastic_timeout{600000};
};

/// Reads rank, size, local rank, store address and secret from HOOP_* variables (and their
/// HOROVOD_* aliases), falling back to OMPI_COMM_WORLD_*, PMIX_RANK, SLURM_* and a Kubernetes
/// Indexed Job's JOB_COMPLETION_INDEX for the rank layout. Without hooprun, rank 0 hosts the
/// store at an address every rank computes from the launcher's variables (host_store).
/// Fails with a message naming the variable when a value is malformed or inconsistent.
/// Where the local layout is not given, all ranks are taken to share one host.
Result<BootstrapInfo> bootstrap_from_env();

/// Connects to the store named by `info` with its secret and job id, then waits until every
/// rank of the job has connected (info.start_timeout); the error names the missing ranks.
Result<std::unique_ptr<Store>> connect_store(const BootstrapInfo& info);

// Elastic jobs. hooprun publishes each membership of the job, a round, in its store:
//   hoop/elastic/worker/<r>/<id>  "rank size local_rank local_size cross_rank cross_size"
//   hoop/elastic/latest           "<r>", the newest round, then
//   hoop/elastic/round/<r>        "", once everything above is set.
// A worker joins the newest round, finds its rank under its name (no key: it is not part of
// the round) and waits until every rank of the round has joined, moving on to a newer round
// when one appears first.

/// One worker's place in a round.
struct ElasticPlace {
  int rank = 0;        ///< the worker's rank in the round
  int size = 1;        ///< the number of ranks in the round
  int local_rank = 0;  ///< its rank among the ranks of its host
  int local_size = 1;  ///< the number of ranks on its host
  int cross_rank = 0;  ///< the index of its host among the hosts
  int cross_size = 1;  ///< the number of hosts
  /// Whether every field is equal.
  bool operator==(const ElasticPlace&) const = default;
};

/// hooprun's side: publishes round `round`, each worker name with its place. Rounds only grow.
Status publish_elastic_round(Store& store, int round,
                             const std::vector<std::pair<std::string, ElasticPlace>>& workers);
/// The newest round published; -1 when none is.
Result<int> latest_elastic_round(Store& store);
/// Whether rank `rank` of round `round` has joined it.
Result<bool> elastic_rank_joined(Store& store, int round, int rank);
/// A worker's side: tells hooprun that round `round` failed on its rank `rank` (a collective
/// that lost a peer or timed out, a set-up that could not connect), with `cause` and the rank's
/// HOOP_TIMEOUT_SECONDS. hooprun starts a new round once every worker of the round reported,
/// and stops those that did not within that timeout (stopped, hung: elastic.cc in launch).
Status report_failed_elastic_round(Store& store, int round, int rank,
                                   std::chrono::milliseconds timeout, std::string_view cause);

/// What the workers of a round reported of its failure.
struct FailedElasticRound {
  std::vector<int> ranks;                ///< those that reported, ascending; empty: none did
  std::chrono::milliseconds timeout{0};  ///< the largest HOOP_TIMEOUT_SECONDS among them
  std::string cause;                     ///< the lowest reporting rank's
};
/// hooprun's side: the reports of round `round`'s failure by its `size` ranks.
Result<FailedElasticRound> failed_elastic_round(Store& store, int round, int size);

/// A worker's side: connects to the store `info` names and joins the newest round numbered
/// `min_round` or more (waiting for it up to info.elastic_timeout), filling in info's layout,
/// elastic_round and key_prefix. Fails with kAborted when the worker is not part of that round
/// (hooprun removed it) and with a timeout naming the missing ranks when the round's ranks do
/// not all join in time.
Result<std::unique_ptr<Store>> join_elastic_round(BootstrapInfo& info, int min_round);

}  // namespace hoop
