// Rank 0's own rendezvous store, for jobs that no hooprun hosts one for (mpirun, srun,
// Kubernetes). The store must outlive every rank's use of it, as hooprun's does; rank 0 may
// finish first, so the server lives until its process exits and then waits for the others.
#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "rendezvous/launchers.h"

namespace hoop::rendezvous {
namespace {

using std::chrono::milliseconds;

class HostedServer {
 public:
  ~HostedServer() {
    if (!server_) return;
    // Rank 0's own clients are counted by CountedStore; the rest belong to other ranks.
    const auto deadline = std::chrono::steady_clock::now() + linger_;
    while (std::chrono::steady_clock::now() < deadline) {
      const StoreServerStats s = server_->stats();
      if (s.accepted - s.closed <= static_cast<std::uint64_t>(local_clients_.load())) break;
      std::this_thread::sleep_for(milliseconds(20));
    }
    server_->stop();
  }

  // Starts the server the first time; later calls (a second Communicator) reuse it.
  Status ensure(const BootstrapInfo& info, const StoreOptions& options) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string where = fmt::format("{}:{}", info.store_host, info.store_port);
    if (server_) {
      if (where == where_) return Status::success();
      return invalid_argument(fmt::format(
          "rank 0 already hosts the rendezvous store at {}, not at {}", where_, where));
    }
    // A Kubernetes pod's own DNS name may appear only after it starts: retry until the
    // start timeout, like the other ranks retry connecting.
    const auto deadline = std::chrono::steady_clock::now() + info.start_timeout;
    for (;;) {
      Result<std::unique_ptr<StoreServer>> server =
          StoreServer::start(info.store_host, info.store_port, options);
      if (server.ok()) {
        server_ = std::move(*server);
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline)
        return server.status().with_context(fmt::format(
            "rank 0 ({}) cannot host the rendezvous store on {} (HOOP_RENDEZVOUS_ADDR/PORT "
            "choose another address or port)",
            info.launcher, where));
      std::this_thread::sleep_for(milliseconds(200));
    }
    where_ = where;
    linger_ = info.timeout;
    HOOP_LOG(kInfo, "rank 0 hosts the rendezvous store of this {} job on {}", info.launcher,
             where);
    return Status::success();
  }

  std::atomic<int>& local_clients() { return local_clients_; }

 private:
  std::mutex mu_;
  std::unique_ptr<StoreServer> server_;
  std::string where_;
  milliseconds linger_{0};
  std::atomic<int> local_clients_{0};
};

HostedServer& hosted_server() {
  static HostedServer server;
  return server;
}

// A client of rank 0's own store, counted so that the server's exit wait skips it.
class CountedStore final : public Store {
 public:
  explicit CountedStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {
    ++hosted_server().local_clients();
  }
  ~CountedStore() override {
    inner_.reset();
    --hosted_server().local_clients();
  }
  Status set(std::string_view key, std::string_view value) override {
    return inner_->set(key, value);
  }
  Result<std::string> get(std::string_view key) override { return inner_->get(key); }
  Status wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    return inner_->wait(keys, timeout);
  }
  Result<std::int64_t> add(std::string_view key, std::int64_t delta) override {
    return inner_->add(key, delta);
  }
  Result<bool> remove(std::string_view key) override { return inner_->remove(key); }

 private:
  std::unique_ptr<Store> inner_;
};

}  // namespace

Result<std::unique_ptr<Store>> connect_hosted_store(const BootstrapInfo& info,
                                                    StoreOptions options) {
  if (info.rank == 0) {
    // Constructed before the first client, so destroyed after rank 0's own stores.
    HostedServer& server = hosted_server();
    HOOP_RETURN_IF_ERROR(server.ensure(info, options));
  }
  Result<std::unique_ptr<Store>> store =
      Store::connect(info.store_host, info.store_port, options, info.rank);
  if (!store.ok())
    return store.status().with_context(
        fmt::format("rank {} of a {} job: the rendezvous store that rank 0 hosts at {}:{}",
                    info.rank, info.launcher, info.store_host, info.store_port));
  if (info.rank != 0) return store;
  return std::unique_ptr<Store>(std::make_unique<CountedStore>(std::move(*store)));
}

}  // namespace hoop::rendezvous
