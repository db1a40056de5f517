// Parameter-server and sharded key-value-store training: the strategies the seed study sets
// against allreduce, built on the point-to-point requests of hoop's transports.
//
// Every message is a whole flat vector of floats (the parameters in model order): gradients go
// to where parameters are served, parameters come back. Messages between two ranks are matched
// in the order they were posted, so each side knows what the next one is without a header.
// The asynchronous server keeps one receive posted per worker and takes whichever completes
// first, which a Communicator's blocking recv (one peer at a time) could not do.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "clock.h"
#include "hoop/communicator.h"
#include "hoop/train.h"

namespace hoop::train {
namespace {

constexpr std::chrono::milliseconds kAsyncPoll{1};

}  // namespace

Strategy parse_strategy(const std::string& name) {
  for (Strategy s : {Strategy::kAllreduce, Strategy::kParameterServer,
                     Strategy::kParameterServerAsync, Strategy::kKvStore}) {
    if (strategy_name(s) == name) return s;
  }
  throw Error(invalid_argument(
      fmt::format("strategy \"{}\": expected allreduce, ps, ps-async or kvstore", name)));
}

std::string strategy_name(Strategy strategy) {
  switch (strategy) {
    case Strategy::kAllreduce:
      return "allreduce";
    case Strategy::kParameterServer:
      return "ps";
    case Strategy::kParameterServerAsync:
      return "ps-async";
    case Strategy::kKvStore:
      return "kvstore";
  }
  return "strategy " + std::to_string(static_cast<int>(strategy));
}

bool has_server(Strategy strategy) {
  return strategy == Strategy::kParameterServer || strategy == Strategy::kParameterServerAsync;
}

struct ParameterExchange::Impl {
  Strategy strategy;
  Sequential& model;
  std::vector<Parameter*> params;
  std::size_t count = 0;  // floats in the flat vector
  std::unique_ptr<Communicator> comm;
  int rank = 0;
  int size = 1;
  int server = -1;         // its rank, or -1 (kvstore)
  int workers = 1;         // ranks 0..workers-1 (the server, when there is one, comes after them)
  std::vector<float> out;  // what this rank sends: gradients (worker) or parameters (server)
  std::vector<float> in;   // what it receives
  std::vector<std::vector<float>> from;  // per worker: its push (server, kvstore owner)
  // The optimizer and what it updates: the model's own parameters on the server, this rank's
  // shard as one parameter with kvstore.
  Parameter shard;
  std::size_t shard_begin = 0;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<std::uint64_t> staleness;
  double waiting = 0;

  Impl(Strategy s, Sequential& m) : strategy(s), model(m), params(m.parameters()) {}

  Transport& transport() { return comm->transport(); }
  Deadline deadline() const { return Clock::now() + comm->timeout(); }

  // The shard of kvstore worker w: [begin, end) of the flat vector.
  std::size_t shard_edge(int w) const {
    return count * static_cast<std::size_t>(w) / static_cast<std::size_t>(workers);
  }

  // Fails the transport with `status` (so that every peer fails with the same cause) and
  // throws it with `what` before it.
  [[noreturn]] void fail(const Status& status, const std::string& what) {
    const Status s =
        status.with_context(fmt::format("{} (rank {}): {}", strategy_name(strategy), rank, what));
    transport().abort(s);
    throw Error(s);
  }
  void wait_all(std::vector<RequestId>& ids, const std::string& what) {
    const Status s = transport().wait(ids, deadline());
    ids.clear();
    if (!s.ok()) fail(s, what);
  }
  RequestId post_send(int peer, const float* data, std::size_t n) {
    auto id = transport().send(peer, data, n * sizeof(float));
    if (!id.ok()) fail(id.status(), fmt::format("sending to rank {}", peer));
    return *id;
  }
  RequestId post_recv(int peer, float* data, std::size_t n) {
    auto id = transport().recv(peer, data, n * sizeof(float));
    if (!id.ok()) fail(id.status(), fmt::format("receiving from rank {}", peer));
    return *id;
  }

  // Every parameter's value or grad (`which`), in model order, into the flat vector `dst`.
  void pack(Tensor Parameter::*which, float* dst) const {
    for (const Parameter* p : params)
      dst = std::copy_n((p->*which).data(), (p->*which).size(), dst);
  }
  // The flat vector `src` back into every parameter's value or grad.
  void unpack(Tensor Parameter::*which, const float* src) {
    for (Parameter* p : params) {
      std::copy_n(src, (p->*which).size(), (p->*which).data());
      src += (p->*which).size();
    }
  }

  // dst = the mean over workers of from[w][begin, begin + n), summed in worker order so that
  // every run adds alike.
  void average(float* dst, std::size_t begin, std::size_t n) const {
    const float scale = 1.0f / static_cast<float>(workers);
    std::copy_n(from[0].data() + begin, n, dst);
    for (int w = 1; w < workers; ++w) {
      const float* src = from[static_cast<std::size_t>(w)].data() + begin;
      for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
    }
    for (std::size_t i = 0; i < n; ++i) dst[i] *= scale;
  }

  void worker_step_ps();
  void worker_step_kvstore();
  void serve_sync(std::size_t steps);
  void serve_async(std::size_t steps);
};

ParameterExchange::ParameterExchange(Strategy strategy, Sequential& model,
                                     const OptimizerFactory& make_optimizer)
    : impl_(std::make_unique<Impl>(strategy, model)) {
  Impl& m = *impl_;
  if (strategy == Strategy::kAllreduce)
    throw Error(
        invalid_argument("ParameterExchange: the allreduce strategy averages through "
                         "DistributedOptimizer, not a parameter exchange"));
  for (const Parameter* p : m.params) {
    if (p->value.is_cuda())
      throw Error(invalid_argument(
          fmt::format("{}: parameter {} is on a CUDA device; this strategy trains on the CPU only",
                      strategy_name(strategy), p->name)));
    m.count += p->value.size();
  }
  CommunicatorOptions options;
  options.key_prefix = "hoop/exchange";
  auto comm = Communicator::create(options);
  if (!comm.ok()) throw Error(comm.status().with_context(strategy_name(strategy)));
  m.comm = std::move(*comm);
  m.rank = m.comm->rank();
  m.size = m.comm->size();
  if (has_server(strategy)) {
    if (m.size < 2)
      throw Error(invalid_argument(
          fmt::format("{} needs a server and at least one worker: launch workers + 1 ranks "
                      "(hooprun -np 3 for 2 workers), not {}",
                      strategy_name(strategy), m.size)));
    m.server = m.size - 1;
    m.workers = m.size - 1;
  } else {
    m.workers = m.size;
  }
  const bool serves = m.rank == m.server || strategy == Strategy::kKvStore;
  m.out.resize(m.count);
  m.in.resize(m.count);
  if (serves) m.from.assign(static_cast<std::size_t>(m.workers), std::vector<float>(m.count));
  if (m.rank == m.server) {
    m.optimizer = make_optimizer(m.params);
    m.staleness.assign(1, 0);
  } else if (strategy == Strategy::kKvStore) {
    m.shard_begin = m.shard_edge(m.rank);
    const auto n = static_cast<std::int64_t>(m.shard_edge(m.rank + 1) - m.shard_begin);
    m.shard.name = fmt::format("shard{}", m.rank);
    m.shard.value = Tensor({n});
    m.shard.grad = Tensor({n});
    m.pack(&Parameter::value, m.in.data());
    std::copy_n(m.in.data() + m.shard_begin, n, m.shard.value.data());
    m.optimizer = make_optimizer({&m.shard});
  }
}

ParameterExchange::~ParameterExchange() = default;

Strategy ParameterExchange::strategy() const { return impl_->strategy; }
bool ParameterExchange::is_server() const { return impl_->rank == impl_->server; }
int ParameterExchange::worker() const { return is_server() ? -1 : impl_->rank; }
int ParameterExchange::workers() const { return impl_->workers; }
const std::vector<std::uint64_t>& ParameterExchange::staleness() const { return impl_->staleness; }
double ParameterExchange::waiting_seconds() const { return impl_->waiting; }
void ParameterExchange::reset_timers() { impl_->waiting = 0; }

void ParameterExchange::step() {
  Impl& m = *impl_;
  if (is_server())
    throw Error(invalid_argument(
        fmt::format("{}: step() is a worker's call; the server (rank {}) calls serve()",
                    strategy_name(m.strategy), m.rank)));
  const double start = detail::now_seconds();
  if (m.strategy == Strategy::kKvStore) {
    m.worker_step_kvstore();
  } else {
    m.worker_step_ps();
  }
  m.model.zero_grad();
  m.waiting += detail::now_seconds() - start;
}

void ParameterExchange::serve(std::size_t steps) {
  Impl& m = *impl_;
  if (!is_server())
    throw Error(
        invalid_argument(fmt::format("{}: serve() is the server's call; rank {} is a worker",
                                     strategy_name(m.strategy), m.rank)));
  if (m.strategy == Strategy::kParameterServerAsync) {
    m.serve_async(steps);
  } else {
    m.serve_sync(steps);
  }
}

void ParameterExchange::Impl::worker_step_ps() {
  pack(&Parameter::grad, out.data());
  std::vector<RequestId> ids{post_send(server, out.data(), count),
                             post_recv(server, in.data(), count)};
  wait_all(ids, fmt::format("pushing gradients to and pulling parameters from the server, rank {}",
                            server));
  unpack(&Parameter::value, in.data());
}

void ParameterExchange::Impl::worker_step_kvstore() {
  pack(&Parameter::grad, out.data());
  const std::size_t n = shard_edge(rank + 1) - shard_begin;
  std::vector<RequestId> ids;
  // Push: each shard's gradients to its owner, and every worker's share of this rank's shard.
  for (int w = 0; w < workers; ++w) {
    if (w == rank) continue;
    ids.push_back(post_send(w, out.data() + shard_edge(w), shard_edge(w + 1) - shard_edge(w)));
    ids.push_back(post_recv(w, from[static_cast<std::size_t>(w)].data() + shard_begin, n));
  }
  wait_all(ids, "pushing gradients to the shards' owners");
  std::copy_n(out.data() + shard_begin, n,
              from[static_cast<std::size_t>(rank)].data() + shard_begin);
  average(shard.grad.data(), shard_begin, n);
  optimizer->step();
  // Pull: this shard's new parameters to every worker, every other shard from its owner.
  std::copy_n(shard.value.data(), n, in.data() + shard_begin);
  for (int w = 0; w < workers; ++w) {
    if (w == rank) continue;
    ids.push_back(post_send(w, in.data() + shard_begin, n));
    ids.push_back(post_recv(w, in.data() + shard_edge(w), shard_edge(w + 1) - shard_edge(w)));
  }
  wait_all(ids, "pulling parameters from the shards' owners");
  unpack(&Parameter::value, in.data());
}

void ParameterExchange::Impl::serve_sync(std::size_t steps) {
  std::vector<RequestId> ids;
  for (std::size_t s = 0; s < steps; ++s) {
    for (int w = 0; w < workers; ++w)
      ids.push_back(post_recv(w, from[static_cast<std::size_t>(w)].data(), count));
    wait_all(ids, fmt::format("waiting for the workers' gradients of step {}", s + 1));
    average(in.data(), 0, count);
    unpack(&Parameter::grad, in.data());
    optimizer->step();
    pack(&Parameter::value, out.data());
    for (int w = 0; w < workers; ++w) ids.push_back(post_send(w, out.data(), count));
    wait_all(ids, "sending the parameters to the workers");
    ++staleness[0];
  }
}

// Each worker's push is applied on its own as soon as it is in; the worker then gets the
// parameters as they are after it. A worker's gradients are `staleness` updates old when other
// workers' updates landed between its pull and its push.
void ParameterExchange::Impl::serve_async(std::size_t steps) {
  const auto n = static_cast<std::size_t>(workers);
  std::vector<std::size_t> left(n, steps);
  std::vector<std::uint64_t> pulled(n, 0);  // the update count each worker's parameters have
  std::vector<std::vector<float>> replies(n, std::vector<float>(count));
  std::vector<RequestId> recvs(n), sends;
  std::vector<bool> posted(n, false);
  for (std::size_t w = 0; w < n && steps > 0; ++w) {
    recvs[w] = post_recv(static_cast<int>(w), from[w].data(), count);
    posted[w] = true;
  }
  std::uint64_t version = 0;
  std::size_t outstanding = steps > 0 ? n : 0;
  Deadline idle_until = deadline();
  while (outstanding > 0) {
    bool any = false;
    for (std::size_t w = 0; w < n; ++w) {
      if (!posted[w]) continue;
      const int peer = static_cast<int>(w);
      auto done = transport().test(recvs[w]);
      if (!done.ok())
        fail(done.status(), fmt::format("waiting for worker rank {}'s gradients", peer));
      if (!*done) continue;
      any = true;
      const std::uint64_t age = version - pulled[w];
      if (staleness.size() <= age) staleness.resize(age + 1, 0);
      ++staleness[age];
      unpack(&Parameter::grad, from[w].data());
      optimizer->step();
      ++version;
      pack(&Parameter::value, replies[w].data());
      pulled[w] = version;
      sends.push_back(post_send(peer, replies[w].data(), count));
      posted[w] = --left[w] > 0;
      if (posted[w]) {
        recvs[w] = post_recv(peer, from[w].data(), count);
      } else {
        --outstanding;
      }
    }
    // The reply to a worker is complete before its next push arrives; collect finished sends
    // here so that the list does not grow over an epoch.
    std::erase_if(sends, [&](RequestId id) {
      auto done = transport().test(id);
      if (!done.ok()) fail(done.status(), "sending parameters to a worker");
      return *done;
    });
    if (any) {
      idle_until = deadline();
    } else if (Clock::now() > idle_until) {
      std::string silent;
      for (std::size_t w = 0; w < n; ++w)
        if (posted[w])
          silent += fmt::format("{}rank {}", silent.empty() ? "" : ", ", static_cast<int>(w));
      fail(timeout_error(
               fmt::format("no gradients from {} within {} ms", silent, comm->timeout().count())),
           "serving asynchronous pushes");
    } else {
      transport().poll(std::chrono::duration_cast<std::chrono::microseconds>(kAsyncPoll));
    }
  }
  wait_all(sends, "sending the parameters to the workers");
}

}  // namespace hoop::train
