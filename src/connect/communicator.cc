// Communicator::create: settings from options and the environment, then the transport.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>

#include "collectives/algorithms/allreduce_table.h"
#include "collectives/algorithms/comm_impl.h"
#include "collectives/algorithms/validate.h"
#include "connect/connect.h"
#include "core/config.h"
#include "core/cores.h"
#include "core/timeline.h"
#include "topology/routed_transport.h"

namespace hoop {
namespace {

/// The transport of a one-rank job: there is no peer, so every send or receive is a bug in
/// the caller and fails; collectives over one rank never call it.
class SelfTransport final : public Transport {
 public:
  std::string_view name() const override { return "self"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool accepts_device_memory() const override { return false; }
  Result<RequestId> send(int peer, const void*, std::size_t) override { return no_peer(peer); }
  Result<RequestId> recv(int peer, void*, std::size_t) override { return no_peer(peer); }
  Status wait(std::span<const RequestId> ids, Deadline) override {
    if (ids.empty()) return Status::success();
    return invalid_argument("wait: unknown request in a one-rank job");
  }
  Result<bool> test(RequestId) override {
    return invalid_argument("test: unknown request in a one-rank job");
  }
  void poll(std::chrono::microseconds timeout) override {
    // Nothing arrives from anywhere: only wake() can end the wait early.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return woken_; });
    woken_ = false;
  }
  void wake() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
    }
    cv_.notify_all();
  }
  bool await_activity(std::chrono::microseconds timeout, bool) override {
    poll(timeout);  // touches nothing but the wake-up flag, so any thread may wait here
    return true;
  }
  void abort(const Status&) override {}

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;

  static Status no_peer(int peer) {
    return invalid_argument(fmt::format("peer {} does not exist in a one-rank job", peer));
  }
};

/// Whether any host of the job runs more ranks than it has cores. Every rank must pick the same
/// algorithm for a call, so the hosts' answers are combined by one small allreduce (max).
Result<bool> job_is_crowded(Communicator& comm, int local_size) {
  std::int32_t crowded = local_size > usable_cores() ? 1 : 0;
  if (comm.size() == 1) return crowded != 0;
  AllreduceOptions o;
  o.output = &crowded;
  o.count = 1;
  o.dtype = DataType::kI32;
  o.op = ReduceOp::kMax;
  o.algorithm = Algorithm::kRecursiveDoubling;
  HOOP_RETURN_IF_ERROR(allreduce(comm, o));
  return crowded != 0;
}

/// The hierarchical allreduce's groups for `rank`, when the layout has the shape it needs: two
/// or more hosts, each with the same number of ranks, at least two.
std::optional<collectives::Hierarchy> hierarchy_of(const topology::Layout& layout, int rank) {
  if (layout.hosts() < 2 || !layout.uniform() || layout.local_size(rank) < 2) return std::nullopt;
  collectives::Hierarchy h;
  h.local = layout.host_ranks[layout.host_of_rank[rank]];
  const int index = layout.local_rank(rank);
  for (const auto& ranks : layout.host_ranks) h.cross.push_back(ranks[index]);
  return h;
}

/// The one part of `routed` serving every peer of `group` but `rank`, or null when they are
/// served by different parts.
Transport* part_serving(const topology::RoutedTransport& routed, const std::vector<int>& group,
                        int rank) {
  Transport* part = nullptr;
  for (int r : group) {
    if (r == rank) continue;
    Transport* p = routed.part_for(r);
    if (part != nullptr && p != part) return nullptr;
    part = p;
  }
  return part;
}

/// Lets the hierarchical allreduce drive its two groups from two threads when each group has a
/// transport of its own (shm inside the host, tcp across); see allreduce_hierarchical.cc.
Status give_parts(collectives::Hierarchy& h, Transport& t, int rank) {
  HOOP_ASSIGN_OR_RETURN(std::int64_t segment, config::get_int("HOOP_HIERARCHICAL_SEGMENT_BYTES"));
  h.segment_bytes = static_cast<std::size_t>(segment);
  const auto* routed = dynamic_cast<const topology::RoutedTransport*>(&t);
  if (routed == nullptr) return Status::success();
  Transport* local = part_serving(*routed, h.local, rank);
  Transport* cross = part_serving(*routed, h.cross, rank);
  if (local != nullptr && cross != nullptr && local != cross) {
    h.local_part = local;
    h.cross_part = cross;
  }
  return Status::success();
}

}  // namespace

std::string_view algorithm_name(Algorithm algorithm) {
  if (algorithm == Algorithm::kAuto) return "auto";
  const collectives::AllreduceEntry* e = collectives::find_allreduce(algorithm);
  return e != nullptr ? e->name : "unknown";
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  if (name == "auto") return Algorithm::kAuto;
  for (const collectives::AllreduceEntry& e : collectives::allreduce_algorithms())
    if (name == e.name || (!e.alias.empty() && name == e.alias)) return e.id;
  return std::nullopt;
}

Result<std::unique_ptr<Communicator>> Communicator::create(const CommunicatorOptions& options) {
  HOOP_ASSIGN_OR_RETURN(BootstrapInfo info, bootstrap_from_env());
  if (info.size == 1) return create(info, nullptr, options);
  // An mpirun job over MPI alone needs no store: its layout comes from MPI.
  if (info.store_host.empty() && info.launcher == "mpirun") return create(info, nullptr, options);
  HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, connect_store(info));
  HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create(info, store.get(), options));
  // The transports need the store only to connect; a first device collective needs it again
  // (NCCL's id, CUDA IPC), so the communicator keeps the connection.
  static_cast<collectives::CommImpl&>(*comm).adopt_store(std::move(store));
  return comm;
}

Result<std::unique_ptr<Communicator>> Communicator::create(const BootstrapInfo& info, Store* store,
                                                           const CommunicatorOptions& options) {
  std::string transport = options.transport;
  if (transport.empty()) {
    HOOP_ASSIGN_OR_RETURN(transport, config::get_string("HOOP_TRANSPORT"));
  }
  HOOP_RETURN_IF_ERROR(connect::check_choice(transport, info));
  Algorithm algorithm = Algorithm::kAuto;
  if (options.algorithm) {
    algorithm = *options.algorithm;
  } else {
    HOOP_ASSIGN_OR_RETURN(std::string name, config::get_string("HOOP_ALGO"));
    std::optional<Algorithm> parsed = parse_algorithm(name);
    if (!parsed) return invalid_argument(fmt::format("HOOP_ALGO: unknown algorithm '{}'", name));
    algorithm = *parsed;
  }
  HOOP_RETURN_IF_ERROR(collectives::check_algorithm(algorithm));
  std::chrono::milliseconds timeout = options.timeout.value_or(info.timeout);
  // HOOP_TIMEOUT_SECONDS is checked where it is read; this catches a value set in code.
  if (timeout.count() <= 0)
    return invalid_argument(
        fmt::format("timeout: {} ms is not positive ({})", timeout.count(),
                    options.timeout ? "CommunicatorOptions::timeout" : "BootstrapInfo::timeout"));
  HOOP_ASSIGN_OR_RETURN(collectives::CostParams cost, collectives::cost_params_from_env());
  if (info.size < 1 || info.rank < 0 || info.rank >= info.size)
    return invalid_argument(
        fmt::format("rank {} of size {} is not a valid place in a job", info.rank, info.size));
  // HOOP_TIMELINE applies to programs that use the Communicator alone too.
  HOOP_RETURN_IF_ERROR(open_process_timeline(info.rank));

  std::unique_ptr<Transport> t;
  std::optional<collectives::Hierarchy> hierarchy;
  std::vector<int> ring;
  int local_size = 1;
  if (info.size == 1) {
    t = std::make_unique<SelfTransport>();
  } else {
    if (store == nullptr && connect::needs_store(transport))
      return invalid_argument(fmt::format(
          "store: a {}-rank job needs a rendezvous store (set HOOP_RENDEZVOUS_ADDR/PORT and "
          "HOOP_SECRET{})",
          info.size, info.launcher == "mpirun" ? ", or HOOP_TRANSPORT=mpi under mpirun" : ""));
    // Where every rank runs decides the transport of each pair and the hierarchy.
    HOOP_ASSIGN_OR_RETURN(connect::Connection c,
                          connect::connect_job(info, store, transport, options.key_prefix));
    t = std::move(c.transport);
    local_size = c.layout.local_size(info.rank);
    hierarchy = hierarchy_of(c.layout, info.rank);
    if (hierarchy) HOOP_RETURN_IF_ERROR(give_parts(*hierarchy, *t, info.rank));
    ring = topology::ring_order(c.layout);
  }
  auto comm = std::make_unique<collectives::CommImpl>(std::move(t), algorithm, timeout, cost);
  HOOP_ASSIGN_OR_RETURN(bool check_calls, config::get_bool("HOOP_CALL_CHECK"));
  comm->set_call_check(check_calls);
  if (hierarchy) comm->set_hierarchy(std::move(*hierarchy));
  // Each host's ranks together: the ring crosses between hosts once per host, whatever order
  // the launcher numbered the ranks in (rank order itself when it did so host by host).
  if (!std::is_sorted(ring.begin(), ring.end()))
    HOOP_RETURN_IF_ERROR(comm->set_ring_order(std::move(ring)));
  collectives::DeviceSetup device_setup;
  device_setup.info = info;
  device_setup.store = store;
  device_setup.key_prefix = options.key_prefix;
  device_setup.one_host = local_size == info.size;
  comm->set_device_setup(std::move(device_setup));
  HOOP_ASSIGN_OR_RETURN(bool crowded, job_is_crowded(*comm, local_size));
  comm->set_crowded(crowded);
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace hoop
