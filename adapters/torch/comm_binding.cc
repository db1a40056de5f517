// hoop._hoop's Communicator half, for hoop.torch.distributed (the torch.distributed backend):
// a rendezvous store hosted in this process, communicators built over it, and the
// Communicator's non-blocking collectives as request ids. As in binding.cc, tensors arrive as
// (pointer, element count, dtype name) and the caller keeps them alive until the request is done.
#include "adapters/torch/comm_binding.h"

#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/rendezvous.h"

namespace hoop::python {
namespace {

namespace py = pybind11;
using Counts = std::vector<std::size_t>;

const void* in_ptr(std::uintptr_t p) { return reinterpret_cast<const void*>(p); }
void* out_ptr(std::uintptr_t p) { return reinterpret_cast<void*>(p); }

/// f() without the GIL (a call that may wait on the network).
template <typename F>
auto without_gil(const F& f) {
  py::gil_scoped_release release;
  return f();
}

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

/// The store of one process group, served from its rank 0.
class StoreHost {
 public:
  StoreHost(const std::string& bind, const std::string& secret, const std::string& job_id,
            double timeout_s) {
    Result<std::unique_ptr<StoreServer>> s =
        StoreServer::start(bind, 0, StoreOptions{secret, job_id, millis(timeout_s)});
    if (!s.ok()) raise(s.status().with_context("hoop store"));
    server_ = std::move(*s);
  }
  int port() const { return server_->port(); }
  void stop() { server_->stop(); }

 private:
  std::unique_ptr<StoreServer> server_;
};

/// The store of the job hoop's launcher variables describe (hooprun's, or rank 0's under
/// mpirun, srun or a Kubernetes Indexed Job), for torch.distributed's rendezvous when torch's
/// own variables are not set. Keys live under "torch/", apart from hoop's.
class JobStore {
 public:
  explicit JobStore(double timeout_s) {
    Result<BootstrapInfo> info = bootstrap_from_env();
    if (!info.ok()) raise(info.status());
    info_ = std::move(*info);
    timeout_ = millis(timeout_s);
    if (info_.size == 1) return;  // nothing to meet: set/get work on a map of this process
    py::gil_scoped_release release;  // connecting waits for the other ranks
    info_.start_timeout = timeout_;
    Result<std::unique_ptr<Store>> store = connect_store(info_);
    if (!store.ok()) {
      py::gil_scoped_acquire acquire;
      raise(store.status().with_context("hoop job store (" + info_.launcher + ")"));
    }
    store_ = std::move(*store);
  }

  int rank() const { return info_.rank; }
  int size() const { return info_.size; }
  int local_rank() const { return info_.local_rank; }
  int local_size() const { return info_.local_size; }
  const std::string& launcher() const { return info_.launcher; }

  void set(const std::string& key, const py::bytes& value) {
    const std::string v = value;
    if (store_ == nullptr) {
      local_[key] = v;
      return;
    }
    Status s = without_gil([&] { return store_->set(kPrefix + key, v); });
    if (!s.ok()) raise(s);
  }
  /// The value of `key`, waiting for it up to the store's timeout.
  py::bytes get(const std::string& key) {
    if (store_ == nullptr) {
      const auto it = local_.find(key);
      if (it == local_.end()) raise(not_found("store key '" + key + "' is not set"));
      return py::bytes(it->second);
    }
    Result<std::string> v = without_gil([&] { return store_->wait_get(kPrefix + key, timeout_); });
    if (!v.ok()) raise(v.status());
    return py::bytes(*v);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) {
    if (store_ == nullptr) {
      std::int64_t& n = counters_[key];
      return n += delta;
    }
    Result<std::int64_t> v = without_gil([&] { return store_->add(kPrefix + key, delta); });
    if (!v.ok()) raise(v.status());
    return *v;
  }
  /// Waits until every key is set, for `timeout_s` seconds (negative: the store's timeout).
  void wait(const std::vector<std::string>& keys, double timeout_s) {
    if (store_ == nullptr) return;
    std::vector<std::string> prefixed;
    for (const std::string& k : keys) prefixed.push_back(kPrefix + k);
    const std::chrono::milliseconds within = timeout_s < 0 ? timeout_ : millis(timeout_s);
    Status s = without_gil([&] { return store_->wait(prefixed, within); });
    if (!s.ok()) raise(s);
  }
  bool remove(const std::string& key) {
    if (store_ == nullptr) return local_.erase(key) + counters_.erase(key) > 0;
    Result<bool> v = without_gil([&] { return store_->remove(kPrefix + key); });
    if (!v.ok()) raise(v.status());
    return *v;
  }

 private:
  static constexpr const char* kPrefix = "torch/";
  BootstrapInfo info_;
  std::chrono::milliseconds timeout_{};
  std::unique_ptr<Store> store_;
  std::unordered_map<std::string, std::string> local_;
  std::unordered_map<std::string, std::int64_t> counters_;
};

/// One process group's communicator and its requests in flight.
class Comm {
 public:
  Comm(int rank, int size, const std::string& host, int port, const std::string& secret,
       const std::string& job_id, double timeout_s) {
    BootstrapInfo info;
    info.rank = rank;
    info.size = size;
    info.local_rank = rank;
    info.local_size = size;
    info.store_host = host;
    info.store_port = static_cast<std::uint16_t>(port);
    info.secret = secret;
    info.job_id = job_id;
    info.launcher = "torch";
    info.start_timeout = info.timeout = millis(timeout_s);
    py::gil_scoped_release release;  // connecting waits for the other ranks
    if (size > 1) {
      Result<std::unique_ptr<Store>> store = connect_store(info);
      if (!store.ok()) {
        py::gil_scoped_acquire acquire;
        raise(store.status());
      }
      store_ = std::move(*store);
    }
    CommunicatorOptions options;
    options.timeout = info.timeout;
    Result<std::unique_ptr<Communicator>> comm = Communicator::create(info, store_.get(), options);
    // Point-to-point gets connections of its own: a receive must never meet a collective's
    // message, and a send waiting for its peer must not hold up the collectives.
    if (comm.ok() && size > 1) {
      options.key_prefix = "hoop/p2p";
      Result<std::unique_ptr<Communicator>> p2p = Communicator::create(info, store_.get(), options);
      if (!p2p.ok()) comm = p2p.status();
      else p2p_ = std::move(*p2p);
    }
    if (!comm.ok()) {
      py::gil_scoped_acquire acquire;
      raise(comm.status());
    }
    comm_ = std::move(*comm);
    timeout_ = info.timeout;
  }

  ~Comm() {
    py::gil_scoped_release release;  // destroying a communicator waits for its calls
    comm_.reset();
    p2p_.reset();
  }

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }

  // Each collective either starts its non-blocking form and returns a request id for
  // wait/test, or, with `now` (a small call: the hand-off to the communicator's thread costs
  // more than the call takes), runs the blocking form on this thread without the GIL and
  // returns 0.
  std::int64_t allreduce(std::uintptr_t in, std::uintptr_t out, std::size_t count,
                         const std::string& dtype, const std::string& op, bool now) {
    const AllreduceOptions o{.input = in_ptr(in),
                             .output = out_ptr(out),
                             .count = count,
                             .dtype = dtype_of(dtype),
                             .op = op_of(op)};
    return call(now, [&] { return hoop::allreduce(*comm_, o); },
                [&] { return iallreduce(*comm_, o); });
  }
  std::int64_t broadcast(std::uintptr_t buffer, std::size_t count, const std::string& dtype,
                         int root, bool now) {
    const BroadcastOptions o{.buffer = out_ptr(buffer),
                             .count = count,
                             .dtype = dtype_of(dtype),
                             .root = root};
    return call(now, [&] { return hoop::broadcast(*comm_, o); },
                [&] { return ibroadcast(*comm_, o); });
  }
  std::int64_t allgatherv(std::uintptr_t in, std::uintptr_t out, Counts counts,
                          const std::string& dtype, bool now) {
    auto kept = keep(std::move(counts));
    const AllgathervOptions o{.input = in_ptr(in), .output = out_ptr(out), .counts = *kept,
                              .dtype = dtype_of(dtype)};
    return call(now, [&] { return hoop::allgatherv(*comm_, o); },
                [&] { return iallgatherv(*comm_, o); }, kept);
  }
  std::int64_t reduce_scatterv(std::uintptr_t in, std::uintptr_t out, Counts counts,
                               const std::string& dtype, const std::string& op, bool now) {
    auto kept = keep(std::move(counts));
    const ReduceScattervOptions o{.input = in_ptr(in),
                                  .output = out_ptr(out),
                                  .counts = *kept,
                                  .dtype = dtype_of(dtype),
                                  .op = op_of(op)};
    return call(now, [&] { return hoop::reduce_scatterv(*comm_, o); },
                [&] { return ireduce_scatterv(*comm_, o); }, kept);
  }
  std::int64_t alltoallv(std::uintptr_t in, Counts send_counts, std::uintptr_t out,
                         Counts recv_counts, const std::string& dtype, bool now) {
    auto sends = keep(std::move(send_counts));
    auto recvs = keep(std::move(recv_counts));
    const AlltoallvOptions o{.input = in_ptr(in),
                             .send_counts = *sends,
                             .output = out_ptr(out),
                             .recv_counts = *recvs,
                             .dtype = dtype_of(dtype)};
    return call(now, [&] { return hoop::alltoallv(*comm_, o); },
                [&] { return ialltoallv(*comm_, o); }, sends, recvs);
  }
  std::int64_t barrier(bool now) {
    return call(now, [&] { return hoop::barrier(*comm_); }, [&] { return ibarrier(*comm_); });
  }
  std::int64_t reduce(std::uintptr_t in, std::uintptr_t out, std::size_t count,
                      const std::string& dtype, const std::string& op, int root, bool now) {
    const RootReduceOptions o{.input = in_ptr(in),
                              .output = out_ptr(out),
                              .count = count,
                              .dtype = dtype_of(dtype),
                              .op = op_of(op),
                              .root = root};
    return call(now, [&] { return hoop::reduce(*comm_, o); },
                [&] { return ireduce(*comm_, o); });
  }
  std::int64_t gatherv(std::uintptr_t in, std::uintptr_t out, Counts counts,
                       const std::string& dtype, int root, bool now) {
    auto kept = keep(std::move(counts));
    const GathervOptions o{.input = in_ptr(in),
                           .output = out_ptr(out),
                           .counts = *kept,
                           .dtype = dtype_of(dtype),
                           .root = root};
    return call(now, [&] { return hoop::gatherv(*comm_, o); },
                [&] { return igatherv(*comm_, o); }, kept);
  }
  std::int64_t scatterv(std::uintptr_t in, std::uintptr_t out, Counts counts,
                        const std::string& dtype, int root, bool now) {
    auto kept = keep(std::move(counts));
    const ScattervOptions o{.input = in_ptr(in),
                            .output = out_ptr(out),
                            .counts = *kept,
                            .dtype = dtype_of(dtype),
                            .root = root};
    return call(now, [&] { return hoop::scatterv(*comm_, o); },
                [&] { return iscatterv(*comm_, o); }, kept);
  }

  /// Starts sending `bytes` bytes at `ptr` to `peer`; a request id for wait_p2p/test_p2p.
  std::int64_t send(std::uintptr_t ptr, std::size_t bytes, int peer) {
    return post_p2p(peer, [&](Transport& t) { return t.send(peer, in_ptr(ptr), bytes); });
  }
  /// Starts receiving exactly `bytes` bytes from `peer` into `ptr` (a message of another
  /// length fails the request, naming both).
  std::int64_t recv(std::uintptr_t ptr, std::size_t bytes, int peer) {
    return post_p2p(peer, [&](Transport& t) { return t.recv(peer, out_ptr(ptr), bytes); });
  }

  /// Blocks (without the GIL) until point-to-point request `id` has finished, moving the bytes
  /// of every pending one meanwhile; raises its error, or a timeout after the group's timeout.
  void wait_p2p(std::int64_t id) {
    const auto deadline = Clock::now() + timeout_;
    while (!test_p2p(id)) {
      if (Clock::now() >= deadline) {
        const Status late = timeout_error("point-to-point: the request with rank " +
                                          std::to_string(peer_of(id)) +
                                          " did not complete within the group's timeout");
        // As every hoop call that fails: the peers fail too, with this cause.
        p2p_->transport().abort(late);
        raise(late);
      }
      py::gil_scoped_release release;
      std::lock_guard lock(p2p_mu_);
      p2p_->transport().poll(std::chrono::milliseconds(1));
    }
  }

  /// Whether point-to-point request `id` has finished (raising its error when it failed).
  bool test_p2p(std::int64_t id) {
    std::lock_guard lock(p2p_mu_);
    const auto it = p2p_pending_.find(id);
    if (it == p2p_pending_.end()) return true;  // finished and consumed earlier
    Result<bool> done = p2p_->transport().test(it->second.request);
    if (!done.ok()) {
      p2p_pending_.erase(it);
      raise(done.status());
    }
    if (*done) p2p_pending_.erase(it);
    return *done;
  }

  /// Blocks (without the GIL) until request `id` has finished; raises its error. Releases it.
  void wait(std::int64_t id) {
    Pending p = take(id);
    Status s;
    {
      py::gil_scoped_release release;
      s = p.request.wait();
    }
    if (!s.ok()) raise(s);
  }

  /// Whether request `id` finishes (or fails) within `seconds`, looked at without the GIL; a
  /// small call is done in microseconds, and its caller then needs no thread to complete it.
  bool done_within(std::int64_t id, double seconds) {
    Request r;
    {
      std::lock_guard lock(mu_);
      const auto it = pending_.find(id);
      if (it == pending_.end()) raise(invalid_argument("unknown request " + std::to_string(id)));
      r = it->second.request;
    }
    py::gil_scoped_release release;
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(seconds));
    do {
      Result<bool> done = r.test();
      if (!done.ok() || *done) return true;
      std::this_thread::yield();
    } while (Clock::now() < until);
    return false;
  }

  /// Whether request `id` has finished (raising its error when it failed); kept until waited.
  bool test(std::int64_t id) {
    Request r;
    {
      std::lock_guard lock(mu_);
      const auto it = pending_.find(id);
      if (it == pending_.end()) raise(invalid_argument("unknown request " + std::to_string(id)));
      r = it->second.request;
    }
    Result<bool> done = r.test();
    if (!done.ok()) raise(done.status());
    return *done;
  }

 private:
  struct Pending {
    Request request;
    // Counts a v-form points to, alive until the request is waited for.
    std::vector<std::shared_ptr<const Counts>> counts;
  };

  static std::shared_ptr<const Counts> keep(Counts counts) {
    return std::make_shared<const Counts>(std::move(counts));
  }

  template <typename Blocking, typename Start, typename... Kept>
  std::int64_t call(bool now, const Blocking& blocking, const Start& start, Kept... kept) {
    if (!now) return add(start(), kept...);
    const Status s = without_gil(blocking);
    if (!s.ok()) raise(s);
    return 0;
  }

  template <typename... Kept>
  std::int64_t add(Request r, Kept... kept) {
    std::lock_guard lock(mu_);
    pending_.emplace(next_, Pending{std::move(r), {kept...}});
    return next_++;
  }

  Pending take(std::int64_t id) {
    std::lock_guard lock(mu_);
    const auto it = pending_.find(id);
    if (it == pending_.end()) raise(invalid_argument("unknown request " + std::to_string(id)));
    Pending p = std::move(it->second);
    pending_.erase(it);
    return p;
  }

  struct P2pPending {
    RequestId request;
    int peer;
  };

  template <typename Post>
  std::int64_t post_p2p(int peer, const Post& post) {
    if (p2p_ == nullptr || peer < 0 || peer >= p2p_->size() || peer == p2p_->rank())
      raise(invalid_argument("point-to-point: rank " + std::to_string(peer) +
                             " is not another rank of this group of " +
                             std::to_string(comm_->size())));
    std::lock_guard lock(p2p_mu_);
    Result<RequestId> r = post(p2p_->transport());
    if (!r.ok()) raise(r.status());
    p2p_pending_.emplace(next_p2p_, P2pPending{*r, peer});
    return next_p2p_++;
  }

  int peer_of(std::int64_t id) {
    std::lock_guard lock(p2p_mu_);
    const auto it = p2p_pending_.find(id);
    return it == p2p_pending_.end() ? -1 : it->second.peer;
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Communicator> p2p_;
  std::chrono::milliseconds timeout_{30000};
  std::mutex p2p_mu_;
  std::unordered_map<std::int64_t, P2pPending> p2p_pending_;
  std::int64_t next_p2p_ = 1;
  std::mutex mu_;
  std::unordered_map<std::int64_t, Pending> pending_;
  std::int64_t next_ = 1;
};

}  // namespace

void define_communicator(py::module_& m) {
  py::class_<StoreHost>(m, "StoreHost", "A rendezvous store served from this process.")
      .def(py::init<const std::string&, const std::string&, const std::string&, double>(),
           py::arg("bind"), py::arg("secret"), py::arg("job_id"), py::arg("timeout_s"))
      .def_property_readonly("port", &StoreHost::port)
      .def("stop", &StoreHost::stop);
  m.def(
      "job_layout",
      [] {
        Result<BootstrapInfo> info = bootstrap_from_env();
        if (!info.ok()) raise(info.status());
        py::dict d;
        d["launcher"] = info->launcher;
        d["rank"] = info->rank;
        d["size"] = info->size;
        d["local_rank"] = info->local_rank;
        d["local_size"] = info->local_size;
        return d;
      },
      "The job's layout as hoop's launcher variables give it (launcher 'none' without any), "
      "without connecting to anything.");
  py::class_<JobStore>(m, "JobStore",
                       "The store of the job hoop's launcher variables describe, for "
                       "torch.distributed's rendezvous.")
      .def(py::init<double>(), py::arg("timeout_s"))
      .def_property_readonly("rank", &JobStore::rank)
      .def_property_readonly("size", &JobStore::size)
      .def_property_readonly("local_rank", &JobStore::local_rank)
      .def_property_readonly("local_size", &JobStore::local_size)
      .def_property_readonly("launcher", &JobStore::launcher)
      .def("set", &JobStore::set)
      .def("get", &JobStore::get)
      .def("add", &JobStore::add)
      .def("wait", &JobStore::wait, py::arg("keys"), py::arg("timeout_s") = -1.0)
      .def("remove", &JobStore::remove);
  py::class_<Comm>(m, "Comm", "A Communicator over a StoreHost's store.")
      .def(py::init<int, int, const std::string&, int, const std::string&, const std::string&,
                    double>(),
           py::arg("rank"), py::arg("size"), py::arg("host"), py::arg("port"), py::arg("secret"),
           py::arg("job_id"), py::arg("timeout_s"))
      .def_property_readonly("rank", &Comm::rank)
      .def_property_readonly("size", &Comm::size)
      .def("allreduce", &Comm::allreduce)
      .def("broadcast", &Comm::broadcast)
      .def("allgatherv", &Comm::allgatherv)
      .def("reduce_scatterv", &Comm::reduce_scatterv)
      .def("alltoallv", &Comm::alltoallv)
      .def("barrier", &Comm::barrier)
      .def("reduce", &Comm::reduce)
      .def("gatherv", &Comm::gatherv)
      .def("scatterv", &Comm::scatterv)
      .def("wait", &Comm::wait)
      .def("test", &Comm::test)
      .def("done_within", &Comm::done_within)
      .def("send", &Comm::send)
      .def("recv", &Comm::recv)
      .def("wait_p2p", &Comm::wait_p2p)
      .def("test_p2p", &Comm::test_p2p);
}

}  // namespace hoop::python
