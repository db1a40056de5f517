// Communicator::create: settings from options and the environment, then the transport.
#include <fmt/format.h>
#include <sched.h>

#include <cmath>
#include <condition_variable>
#include <mutex>

#include "collectives/algorithms/comm_impl.h"
#include "core/config.h"
#include "transports/tcp/tcp_transport.h"

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
  void abort(const Status&) override {}

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;

  static Status no_peer(int peer) {
    return invalid_argument(fmt::format("peer {} does not exist in a one-rank job", peer));
  }
};

/// The cores this process may run on (what `nproc` prints).
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

/// Whether any host of the job runs more ranks than it has cores. Every rank must pick the same
/// algorithm for a call, so the hosts' answers are combined by one small allreduce (max).
Result<bool> job_is_crowded(Communicator& comm, const BootstrapInfo& info) {
  std::int32_t crowded = info.local_size > usable_cores() ? 1 : 0;
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

}  // namespace

std::string_view algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRecursiveDoubling:
      return "recursive_doubling";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kRabenseifner:
      return "rabenseifner";
  }
  return "unknown";
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  if (name == "auto") return Algorithm::kAuto;
  if (name == "ring") return Algorithm::kRing;
  if (name == "tree") return Algorithm::kTree;
  if (name == "recursive_doubling" || name == "rd") return Algorithm::kRecursiveDoubling;
  if (name == "rabenseifner" || name == "rab") return Algorithm::kRabenseifner;
  return std::nullopt;
}

Result<std::unique_ptr<Communicator>> Communicator::create(const CommunicatorOptions& options) {
  HOOP_ASSIGN_OR_RETURN(BootstrapInfo info, bootstrap_from_env());
  if (info.size == 1) return create(info, nullptr, options);
  HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, connect_store(info));
  // The store is only needed to set up the mesh; the transport keeps no reference to it.
  return create(info, store.get(), options);
}

Result<std::unique_ptr<Communicator>> Communicator::create(const BootstrapInfo& info, Store* store,
                                                           const CommunicatorOptions& options) {
  std::string transport = options.transport;
  if (transport.empty()) {
    HOOP_ASSIGN_OR_RETURN(transport, config::get_string("HOOP_TRANSPORT"));
  }
  if (transport == "auto") transport = "tcp";
  if (transport != "tcp")
    return invalid_argument(
        fmt::format("transport: unknown transport '{}' (have: tcp)", transport));
  Algorithm algorithm = Algorithm::kAuto;
  if (options.algorithm) {
    algorithm = *options.algorithm;
  } else {
    HOOP_ASSIGN_OR_RETURN(std::string name, config::get_string("HOOP_ALGO"));
    std::optional<Algorithm> parsed = parse_algorithm(name);
    if (!parsed) return invalid_argument(fmt::format("HOOP_ALGO: unknown algorithm '{}'", name));
    algorithm = *parsed;
  }
  if (static_cast<unsigned>(algorithm) > static_cast<unsigned>(Algorithm::kRabenseifner))
    return invalid_argument("algorithm: unknown algorithm value");
  std::chrono::milliseconds timeout = options.timeout.value_or(info.timeout);
  if (timeout.count() <= 0) return invalid_argument("timeout: must be positive");
  HOOP_ASSIGN_OR_RETURN(collectives::CostParams cost, collectives::cost_params_from_env());
  if (info.size < 1 || info.rank < 0 || info.rank >= info.size)
    return invalid_argument(
        fmt::format("rank {} of size {} is not a valid place in a job", info.rank, info.size));

  std::unique_ptr<Transport> t;
  if (info.size == 1) {
    t = std::make_unique<SelfTransport>();
  } else {
    if (store == nullptr)
      return invalid_argument(fmt::format("store: a {}-rank job needs a store", info.size));
    HOOP_ASSIGN_OR_RETURN(tcp::TcpOptions tcp_options, tcp::tcp_options_from_env());
    if (!options.key_prefix.empty()) tcp_options.key_prefix = options.key_prefix;
    HOOP_ASSIGN_OR_RETURN(
        t, tcp::connect_mesh(*store, info.rank, info.size, info.secret, info.job_id, tcp_options));
  }
  auto comm = std::make_unique<collectives::CommImpl>(std::move(t), algorithm, timeout, cost);
  HOOP_ASSIGN_OR_RETURN(bool crowded, job_is_crowded(*comm, info));
  comm->set_crowded(crowded);
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace hoop
