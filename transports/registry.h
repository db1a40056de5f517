// The transport registry: one entry per transport, registered from the transport's own folder
// (its *_register.cc), so that adding a transport touches that folder plus one line in
// transports/CMakeLists.txt. Everything that picks, lists or checks transports loops over the
// entries: the per-pair choice of HOOP_TRANSPORT (src/connect), `hooprun --check-build`, the
// device path's CUDA IPC. Model: NCCL's transport table and Gloo's transport devices.
//
// A transport decides from facts about a pair of ranks (same host, RDMA on every host), never
// from topology's or the collectives' types: the registry knows only the transport contract.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/rendezvous.h"
#include "hoop/transport.h"

namespace hoop::transports {

/// What is known of a pair of ranks (or of the whole job, for a forced choice).
struct PairFacts {
  bool same_host = false;
  /// Every host of the job has an RDMA device (only gathered where an entry asks for it).
  bool rdma_everywhere = false;
  /// The number of hosts in the job.
  int hosts = 1;
};

/// What a transport connects: this rank to `peers` (ascending, without itself).
struct ConnectSpec {
  const BootstrapInfo* info = nullptr;
  /// The job's rendezvous store; null only for a transport with needs_store false.
  Store* store = nullptr;
  std::vector<int> peers;
  /// The communicator's namespace in the store ("hoop" by default).
  std::string key_prefix = "hoop";
  /// The CUDA device, for a transport of device memory.
  int device = -1;
};

/// Whether a transport is usable on this machine, and what `hooprun --check-build` says of it.
struct Probe {
  bool usable = false;
  std::string detail;
};

struct TransportEntry {
  std::string_view name;
  /// Compiled into this hoop; when not, `not_built` says why (for errors and --check-build).
  bool built = false;
  std::string_view not_built;
  /// Looks at this machine (may take a moment); for --check-build, through probe() below,
  /// which answers not_built for an entry this build lacks (null there).
  Probe (*probe)() = nullptr;
  /// Whether HOOP_TRANSPORT=auto gives it the pair; null: auto never picks it. Entries are
  /// asked in ascending auto_order.
  bool (*auto_takes)(const PairFacts& pair) = nullptr;
  int auto_order = 0;
  /// Whether auto_takes reads PairFacts::rdma_everywhere (an exchange through the store).
  bool auto_wants_rdma = false;
  /// Why a job cannot use it when HOOP_TRANSPORT names it (empty: it can); null: never refuses.
  /// `info` is null where no job is at hand (a printed summary): judge by `job` alone then.
  std::string (*refuses)(const BootstrapInfo* info, const PairFacts& job) = nullptr;
  /// Whether it meets through the rendezvous store (MPI does not).
  bool needs_store = true;
  /// For a transport without a store: every rank's `mine`, by rank, gathered over the
  /// transport's own means (the host ids a job without a store needs for its layout).
  Result<std::vector<std::string>> (*gather_without_store)(const BootstrapInfo& info,
                                                           const std::string& mine) = nullptr;
  /// Whether it moves device (GPU) memory rather than host memory.
  bool device_memory = false;
  Result<std::unique_ptr<Transport>> (*connect)(const ConnectSpec& spec) = nullptr;
};

/// Adds an entry (from a static initializer in the transport's folder).
void register_transport(const TransportEntry& entry);
/// Every entry, in ascending auto_order, then by name.
std::vector<const TransportEntry*> registered_transports();
/// The entry called `name`, or null.
const TransportEntry* find_transport(std::string_view name);
/// Whether `name` is registered and compiled into this hoop.
bool transport_built(std::string_view name);
/// What `hooprun --check-build` says of `entry`: its probe, or not_built for a transport this
/// build lacks.
Probe probe(const TransportEntry& entry);
/// The registered names, comma-separated, for error messages ("tcp, shm, ucx, mpi").
std::string transport_names(bool host_memory_only = true);

}  // namespace hoop::transports
