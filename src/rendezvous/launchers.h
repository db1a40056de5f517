// Jobs started without hooprun: mpirun, srun (Slurm) or a Kubernetes Indexed Job start the
// ranks, and rank 0 hosts the rendezvous store itself at an address and port every rank
// computes alike from what the launcher put in its environment.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/core.h"
#include "hoop/rendezvous.h"

namespace hoop::rendezvous {

/// The port of rank 0's store when HOOP_RENDEZVOUS_PORT is not set: kDefaultStorePort plus
/// a hash of the job id modulo kStorePortSpan (torch's MASTER_PORT 29500, spread so that
/// concurrent jobs on one host rarely meet), below Linux's ephemeral ports.
inline constexpr std::uint16_t kDefaultStorePort = 29500;
inline constexpr std::uint16_t kStorePortSpan = 2000;
std::uint16_t default_store_port(std::string_view job_id);

/// Expands a Slurm host list such as "node[01-03,07],gpu5" into node01 node02 node03 node07
/// gpu5, keeping the zero padding of each range; `var` names the variable in errors.
Result<std::vector<std::string>> expand_nodelist(std::string_view list, std::string_view var);

/// Expands SLURM_TASKS_PER_NODE ("2(x3),1") into one task count per node.
Result<std::vector<int>> expand_tasks_per_node(std::string_view text, std::string_view var);

/// Slurm's layout fields that are not plain integers: the number of tasks on this node, from
/// SLURM_TASKS_PER_NODE and SLURM_NODEID; 0 when Slurm does not say.
Result<int> slurm_local_size();

/// For a job whose launcher (info.launcher) is mpirun, pmix, slurm or kubernetes: sets the
/// job id, the store's address and port, the secret and host_store (rank 0 hosts the store).
/// HOOP_RENDEZVOUS_ADDR/PORT, HOOP_SECRET and HOOP_JOB_ID override what the launcher gives.
/// Errors name the variable that is missing or malformed.
Status resolve_launcher_rendezvous(BootstrapInfo& info);

/// On rank 0 of a job with host_store: starts the store (once per process; it then serves
/// until the process exits, and at exit waits, at most info.timeout, for the other ranks to
/// disconnect). Then, on every rank, connects to it and wraps errors with the launcher and
/// the address.
Result<std::unique_ptr<Store>> connect_hosted_store(const BootstrapInfo& info,
                                                    StoreOptions options);

/// The key rank `rank` sets once connected to the store (under info.key_prefix), and the keys
/// of every rank of info's job.
std::string joined_key(const BootstrapInfo& info, int rank);
std::vector<std::string> joined_keys(const BootstrapInfo& info);
/// Connects to the store `info` names (or, with host_store, hosts it on rank 0), without
/// waiting for the other ranks.
Result<std::unique_ptr<Store>> open_store(const BootstrapInfo& info);
/// The timeout error naming the ranks of info's job that have not set their joined key;
/// `within` says how long they had ("30 s (HOOP_START_TIMEOUT)").
Status missing_ranks_error(Store& store, const BootstrapInfo& info, std::string_view within);

}  // namespace hoop::rendezvous
