// The public runtime API (hoop/hoop.h): the job-wide state, argument checks, and the hand-off
// of each call to its process set's Controller.
#ifdef HOOP_BUILT_NCCL
#include <nccl.h>  // NCCL_VERSION_CODE
#endif
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/log.h"
#include "core/timeline.h"
#include "device/device.h"
#include "hoop/hoop.h"
#include "runtime/controller.h"
#include "runtime/runtime_internal.h"

namespace hoop {
namespace {

using runtime::Controller;
using runtime::Entry;
using runtime::OpType;
using runtime::Request;

struct SetState {
  std::vector<int> ranks;  // global ranks, sorted
  int my_rank = -1;        // in the set; -1: not a member (no controller)
  std::unique_ptr<Controller> controller;
};

struct Global {
  std::mutex mu;
  bool initialized = false;
  int generation = 0;  // init() count on one store: fresh store keys for every init
  std::string generation_store;  // the store (address, port, job) `generation` counts on
  /// Where this init's store keys live: hoop/rt<generation>, or hoop/e<round>/rt in an
  /// elastic job, whose processes may have initialized different numbers of times.
  std::string key_base;
  /// The elastic round last joined (-1: none); a reset joins a newer one.
  int elastic_round = -1;
  BootstrapInfo info;
  std::unique_ptr<Store> store;
  runtime::RuntimeSettings settings;
  std::shared_ptr<Timeline> timeline;  // also the collectives' while the runtime runs
  std::map<ProcessSet, SetState> sets;
  ProcessSet next_set = 1;
  /// sets[0]'s controller while the runtime runs, read without `mu` by every submission (the
  /// lock and the map cost a tenth of one); one racing shutdown() was already undefined.
  std::atomic<Controller*> global_controller{nullptr};
};

Global& global() {
  static Global g;
  return g;
}

[[noreturn]] void fail(Status s) { throw Error(std::move(s)); }

/// report_elastic_failure() for the round `info` joined.
void report_failure_to(Store& store, const BootstrapInfo& info, const Status& cause) {
  Status s = report_failed_elastic_round(store, info.elastic_round, info.rank, info.timeout,
                                         cause.to_string());
  if (!s.ok())
    HOOP_LOG(kWarn, "elastic: cannot report the failure of round {} to hooprun: {}",
             info.elastic_round, s.to_string());
}

void check(Status s) {
  if (!s.ok()) fail(std::move(s));
}

Global& initialized_global() {
  Global& g = global();
  if (!g.initialized) fail(invalid_argument("hoop::init() has not been called"));
  return g;
}

/// The entry of set `ps`; the caller holds g.mu.
std::map<ProcessSet, SetState>::iterator find_set(Global& g, ProcessSet ps) {
  auto it = g.sets.find(ps);
  if (it == g.sets.end()) fail(invalid_argument(fmt::format("process set {} does not exist", ps)));
  return it;
}

/// The controller of a set this rank belongs to.
Controller& controller_of(ProcessSet ps) {
  if (ps == kGlobalProcessSet) {
    if (Controller* c = global().global_controller.load(std::memory_order_acquire)) return *c;
  }
  Global& g = initialized_global();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = find_set(g, ps);
  if (it->second.controller == nullptr)
    fail(invalid_argument(
        fmt::format("rank {} is not a member of process set {}", g.info.rank, ps)));
  return *it->second.controller;
}

void check_tensor(const std::string& name, const Tensor& t, const char* role) {
  if (name.empty()) fail(invalid_argument("a tensor needs a non-empty name"));
  if (static_cast<unsigned>(t.dtype) > static_cast<unsigned>(DataType::kI16))
    fail(invalid_argument(fmt::format("tensor '{}': {} has an unknown dtype", name, role)));
  for (std::int64_t d : t.shape)
    if (d < 0)
      fail(invalid_argument(fmt::format("tensor '{}': {} has a negative dimension", name, role)));
  if (t.data == nullptr && t.count() > 0)
    fail(invalid_argument(fmt::format("tensor '{}': {} data is null", name, role)));
  if (t.device == kCpuDevice) return;
  const int devices = device::device_count();
  if (t.device < 0 || t.device >= devices)
    fail(invalid_argument(fmt::format(
        "tensor '{}': {} is on cuda:{}, but this process can use {} CUDA device(s){}", name, role,
        t.device, devices, devices == 0 ? " (" + device::unavailable_reason() + ")" : "")));
  const int actual = device::pointer_device(t.data);
  if (t.data != nullptr && actual != t.device)
    fail(invalid_argument(fmt::format(
        "tensor '{}': {} says cuda:{}, but its data is in {}", name, role, t.device,
        actual == kCpuDevice ? std::string("host memory") : fmt::format("cuda:{}", actual))));
}

void check_scales(const std::string& name, const Tensor& t, const ReduceOptions& o) {
  if (static_cast<unsigned>(o.op) > static_cast<unsigned>(ReduceOp::kAdasum))
    fail(invalid_argument(fmt::format("tensor '{}': unknown reduce op", name)));
  if (o.op == ReduceOp::kAdasum && !dtype_is_float(t.dtype))
    fail(invalid_argument(fmt::format(
        "tensor '{}': op adasum needs a floating-point dtype (f16, bf16, f32, f64), not {}", name,
        dtype_name(t.dtype))));
  // Integer tensors scale on the host (in float64, as Horovod does); the device kernels scale
  // float types only.
  if (!dtype_is_float(t.dtype) && t.device != kCpuDevice &&
      (o.prescale != 1.0 || o.postscale != 1.0))
    fail(invalid_argument(fmt::format(
        "tensor '{}': prescale/postscale other than 1 on a device tensor need a float dtype, "
        "not {}",
        name, dtype_name(t.dtype))));
}

/// Fills a fresh entry's request `r` in place (a Request built apart and moved in costs more).
void describe(Request& r, const std::string& name, OpType type, const Tensor& t) {
  r.name = name;
  r.type = type;
  r.dtype = t.dtype;
  r.shape = t.shape;
  // Ranks agree on host or device memory, not on the device's number: each rank may drive a
  // GPU of its own.
  r.device = t.device == kCpuDevice ? kCpuDevice : 0;
}

/// A checked allreduce submission of one tensor, completing part of `state`.
Entry allreduce_entry(const std::string& name, const Tensor& input, const Tensor& output,
                      const ReduceOptions& options, std::shared_ptr<detail::HandleState> state) {
  check_tensor(name, input, "input");
  check_tensor(name, output, "output");
  if (input.dtype != output.dtype || input.count() != output.count())
    fail(invalid_argument(
        fmt::format("tensor '{}': output must have the input's dtype and element count", name)));
  check_scales(name, input, options);
  Entry e;
  describe(e.request, name, OpType::kAllreduce, input);
  e.request.op = options.op;
  e.request.prescale = options.prescale;
  e.request.postscale = options.postscale;
  e.input = input;
  e.output = output;
  e.handle = std::move(state);
  return e;
}

Handle submit_one(ProcessSet ps, Entry e) {
  Controller& c = controller_of(ps);
  auto state = std::make_shared<detail::HandleState>();
  e.handle = state;
  check(c.submit(std::move(e)));
  return Handle(state);
}

OwnedTensor take_output(const Handle& h) {
  h.wait();
  return std::move(h.output());
}

}  // namespace

/// Starts g's timeline on `path` where this rank writes one: rank 0, or every rank with "%r"
/// in the path replaced by its rank.
Status start_timeline_file(Global& g, const std::string& path, bool mark_cycles) {
  const bool per_rank = path.find("%r") != std::string::npos;
  if (!per_rank && g.info.rank != 0) return Status::success();
  std::string file = path;
  if (per_rank) file.replace(file.find("%r"), 2, std::to_string(g.info.rank));
  return g.timeline->start(file, mark_cycles);
}

namespace {
void shut_down(bool quiet);
}  // namespace

void init() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.initialized) return;
  auto fresh = [&](Status s) {
    // A round joined but not set up (a peer lost while connecting): hooprun must learn that it
    // failed here, or nothing would start the next one.
    if (g.store != nullptr && !g.info.elastic_id.empty() && g.info.elastic_round >= 0)
      report_failure_to(*g.store, g.info, s);
    g.sets.clear();
    set_collectives_timeline(nullptr);
    g.timeline.reset();
    g.store.reset();
    fail(std::move(s));
  };
  Result<BootstrapInfo> info = bootstrap_from_env();
  if (!info.ok()) fresh(info.status());
  Result<runtime::RuntimeSettings> settings = runtime::runtime_settings_from_env();
  if (!settings.ok()) fresh(settings.status());
  g.info = *info;
  g.settings = *settings;
  if (!g.info.elastic_id.empty()) {
    Result<std::unique_ptr<Store>> store = join_elastic_round(g.info, g.elastic_round + 1);
    if (!store.ok()) fresh(store.status());
    g.store = std::move(*store);
    g.elastic_round = g.info.elastic_round;
  } else if (g.info.size > 1) {
    Result<std::unique_ptr<Store>> store = connect_store(g.info);
    if (!store.ok()) fresh(store.status());
    g.store = std::move(*store);
  }
  // Every rank holds a timeline, idle until a file is started, so that start_timeline() can
  // begin one at any time (HOOP_TIMELINE=DYNAMIC: only then, as in Horovod).
  // A timeline a Communicator opened before (the same HOOP_TIMELINE file) is closed first: the
  // runtime's takes the file over, and the collectives write there too while it runs.
  if (std::shared_ptr<Timeline> before = set_collectives_timeline(nullptr)) before->stop();
  g.timeline = Timeline::idle(g.info.rank, g.settings.timeline_max_bytes);
  const std::string& path = g.settings.timeline_path;
  if (!path.empty() && path != "DYNAMIC") {
    Status started = start_timeline_file(g, path, g.settings.timeline_mark_cycles);
    if (!started.ok()) fresh(started.with_context("HOOP_TIMELINE"));
  }
  set_collectives_timeline(g.timeline);
  // The count restarts with every new store: a process that ran an earlier job (a Spark
  // Python worker that hoop.spark reuses, a Ray actor) meets fresh processes at the same keys.
  const std::string store_id =
      fmt::format("{}:{}/{}", g.info.store_host, g.info.store_port, g.info.job_id);
  if (store_id != g.generation_store) g.generation = 0;
  g.generation_store = store_id;
  ++g.generation;
  g.key_base = g.info.elastic_id.empty() ? fmt::format("hoop/rt{}", g.generation)
                                         : g.info.key_prefix + "/rt";
  SetState all;
  for (int r = 0; r < g.info.size; ++r) all.ranks.push_back(r);
  all.my_rank = g.info.rank;
  auto c = Controller::start(g.info, g.info.size > 1 ? g.store.get() : nullptr, g.key_base + "/ps0",
                             g.settings, *g.timeline);
  if (!c.ok()) fresh(c.status());
  all.controller = std::move(*c);
  g.global_controller.store(all.controller.get(), std::memory_order_release);
  g.sets[kGlobalProcessSet] = std::move(all);
  g.next_set = 1;
  g.initialized = true;
  // A program that returns from main without shutdown() leaves the job as shutdown() would:
  // the peers see an orderly end (every rank's runtime stops, later calls fail naming this
  // rank), not a lost rank and an error line. Registered after global() exists, so it runs
  // before global()'s destructor.
  static const bool at_exit = std::atexit([] { shut_down(true); }) == 0;
  (void)at_exit;
}

namespace {

/// shutdown(); `quiet`: a failure the runtime met before is not logged again (at exit, where
/// it was reported when it happened).
void shut_down(bool quiet) {
  Global& g = global();
  std::unique_lock<std::mutex> lock(g.mu);
  if (!g.initialized) return;
  g.initialized = false;
  g.global_controller.store(nullptr, std::memory_order_release);
  std::map<ProcessSet, SetState> sets = std::move(g.sets);
  g.sets.clear();
  lock.unlock();
  Status first;
  // The global set last: the others may still be finishing work.
  for (auto it = sets.rbegin(); it != sets.rend(); ++it) {
    if (it->second.controller == nullptr) continue;
    Status s = it->second.controller->shutdown();
    if (first.ok() && !s.ok()) first = s;
    it->second.controller.reset();
  }
  lock.lock();
  set_collectives_timeline(nullptr);
  g.timeline.reset();
  g.store.reset();
  if (!first.ok() && !quiet) HOOP_LOG(kWarn, "shutdown after a failure: {}", first.to_string());
}

}  // namespace

void shutdown() { shut_down(false); }

void start_timeline(const std::string& path, bool mark_cycles) {
  Global& g = initialized_global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (path.empty()) fail(invalid_argument("start_timeline: the file path is empty"));
  check(start_timeline_file(g, path, mark_cycles).with_context("start_timeline"));
}

void stop_timeline() {
  Global& g = initialized_global();
  std::lock_guard<std::mutex> lock(g.mu);
  g.timeline->stop();
}

namespace runtime {

ElasticView elastic_view() {
  Global& g = initialized_global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.info.elastic_id.empty()) return {};
  return {g.store.get(), g.elastic_round};
}

int last_elastic_round() {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.elastic_round;
}

void report_elastic_failure(const Status& cause) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!g.initialized || g.store == nullptr || g.info.elastic_id.empty()) return;
  report_failure_to(*g.store, g.info, cause);
}

}  // namespace runtime

bool is_initialized() {
  std::lock_guard<std::mutex> lock(global().mu);
  return global().initialized;
}

int rank() { return initialized_global().info.rank; }
int size() { return initialized_global().info.size; }
int local_rank() { return initialized_global().info.local_rank; }
int local_size() { return initialized_global().info.local_size; }
int cross_rank() { return initialized_global().info.cross_rank; }
int cross_size() { return initialized_global().info.cross_size; }

bool cuda_built() { return device::cuda_built(); }
int cuda_device_count() { return device::device_count(); }
std::string cuda_unavailable_reason() { return device::unavailable_reason(); }

bool mpi_built() {
#ifdef HOOP_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool nccl_built() { return nccl_version_code() != 0; }

int nccl_version_code() {
#ifdef HOOP_BUILT_NCCL
  return NCCL_VERSION_CODE;
#else
  return 0;
#endif
}

Handle allreduce_async(const std::string& name, const Tensor& input, const Tensor& output,
                       const ReduceOptions& options) {
  // The common case of a training loop (one call per gradient) builds no vectors of names and
  // tensors, unlike a group of one.
  auto state = std::make_shared<detail::HandleState>();
  check(controller_of(options.process_set)
            .submit(allreduce_entry(name, input, output, options, state)));
  return Handle(state);
}

void allreduce(const std::string& name, const Tensor& input, const Tensor& output,
               const ReduceOptions& options) {
  allreduce_async(name, input, output, options).wait();
}

Handle grouped_allreduce_async(const std::vector<std::string>& names,
                               const std::vector<Tensor>& inputs,
                               const std::vector<Tensor>& outputs, const ReduceOptions& options) {
  if (names.empty() || names.size() != inputs.size() || names.size() != outputs.size())
    fail(invalid_argument(fmt::format(
        "grouped allreduce: {} names, {} inputs and {} outputs; need the same non-zero number",
        names.size(), inputs.size(), outputs.size())));
  std::vector<Entry> entries;
  auto state = std::make_shared<detail::HandleState>();
  state->parts_left = static_cast<int>(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    entries.push_back(allreduce_entry(names[i], inputs[i], outputs[i], options, state));
    if (names.size() > 1) {
      entries.back().request.group = names.front();
      entries.back().request.group_size = static_cast<std::uint32_t>(names.size());
    }
  }
  check(controller_of(options.process_set).submit(std::move(entries)));
  return Handle(state);
}

void grouped_allreduce(const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                       const std::vector<Tensor>& outputs, const ReduceOptions& options) {
  grouped_allreduce_async(names, inputs, outputs, options).wait();
}

Handle allgather_async(const std::string& name, const Tensor& input, ProcessSet ps) {
  check_tensor(name, input, "input");
  Entry e;
  describe(e.request, name, OpType::kAllgather, input);
  if (e.request.shape.empty()) e.request.shape = {1};  // a scalar gathers as one row
  e.input = input;
  return submit_one(ps, std::move(e));
}

OwnedTensor allgather(const std::string& name, const Tensor& input, ProcessSet ps) {
  return take_output(allgather_async(name, input, ps));
}

Handle broadcast_async(const std::string& name, const Tensor& tensor, int root, ProcessSet ps) {
  check_tensor(name, tensor, "tensor");
  const int n = controller_of(ps).size();
  if (root < 0 || root >= n)
    fail(invalid_argument(fmt::format(
        "tensor '{}': broadcast root {} is not a rank of a {}-rank set", name, root, n)));
  Entry e;
  describe(e.request, name, OpType::kBroadcast, tensor);
  e.request.root = root;
  e.input = tensor;
  e.output = tensor;
  return submit_one(ps, std::move(e));
}

void broadcast(const std::string& name, const Tensor& tensor, int root, ProcessSet ps) {
  broadcast_async(name, tensor, root, ps).wait();
}

Handle alltoall_async(const std::string& name, const Tensor& input,
                      const std::vector<std::int64_t>& splits, ProcessSet ps) {
  check_tensor(name, input, "input");
  const int n = controller_of(ps).size();
  const std::int64_t rows = input.shape.empty() ? 1 : input.shape[0];
  if (splits.empty()) {
    if (rows % n != 0)
      fail(invalid_argument(fmt::format(
          "tensor '{}': {} rows do not split evenly over {} ranks; pass splits", name, rows, n)));
  } else {
    std::int64_t sum = 0;
    for (std::int64_t s : splits) sum += s < 0 ? rows + 1 : s;
    if (static_cast<int>(splits.size()) != n || sum != rows)
      fail(invalid_argument(fmt::format(
          "tensor '{}': splits must be {} non-negative row counts summing to {}", name, n, rows)));
  }
  Entry e;
  describe(e.request, name, OpType::kAlltoall, input);
  if (e.request.shape.empty()) e.request.shape = {1};
  e.input = input;
  e.splits = splits;
  return submit_one(ps, std::move(e));
}

OwnedTensor alltoall(const std::string& name, const Tensor& input,
                     const std::vector<std::int64_t>& splits, ProcessSet ps) {
  return take_output(alltoall_async(name, input, splits, ps));
}

Handle reducescatter_async(const std::string& name, const Tensor& input,
                           const ReduceOptions& options) {
  check_tensor(name, input, "input");
  check_scales(name, input, options);
  // Horovod refuses a scalar too: there is no first dimension to scatter over.
  if (input.shape.empty())
    fail(invalid_argument(fmt::format(
        "tensor '{}': reducescatter needs a tensor of at least one dimension, got a scalar",
        name)));
  if (options.op == ReduceOp::kAdasum)
    fail(invalid_argument(fmt::format(
        "tensor '{}': reducescatter cannot take op adasum, which combines whole vectors (only "
        "allreduce takes it)",
        name)));
  Entry e;
  describe(e.request, name, OpType::kReducescatter, input);
  e.request.op = options.op;
  e.request.prescale = options.prescale;
  e.request.postscale = options.postscale;
  e.input = input;
  return submit_one(options.process_set, std::move(e));
}

OwnedTensor reducescatter(const std::string& name, const Tensor& input,
                          const ReduceOptions& options) {
  return take_output(reducescatter_async(name, input, options));
}

void barrier(ProcessSet ps) {
  Controller& c = controller_of(ps);
  Entry e;
  e.request.name = c.next_barrier_name();
  e.request.type = OpType::kBarrier;
  e.request.shape = {0};
  submit_one(ps, std::move(e)).wait();
}

Handle join_async(ProcessSet ps) {
  auto state = std::make_shared<detail::HandleState>();
  check(controller_of(ps).join(state));
  return Handle(state);
}

int join(ProcessSet ps) {
  Handle h = join_async(ps);
  h.wait();
  return h.last_joined_rank();
}

ProcessSet add_process_set(const std::vector<int>& ranks) {
  Global& g = initialized_global();
  std::lock_guard<std::mutex> lock(g.mu);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= g.info.size || (i > 0 && ranks[i] <= ranks[i - 1]))
      fail(invalid_argument(fmt::format(
          "add_process_set: ranks [{}] must be sorted, distinct and below the job size {}",
          fmt::join(ranks, ", "), g.info.size)));
  }
  if (ranks.empty()) fail(invalid_argument("add_process_set: a process set needs a rank"));
  const ProcessSet id = g.next_set++;
  SetState set;
  set.ranks = ranks;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == g.info.rank) set.my_rank = static_cast<int>(i);
  if (set.my_rank >= 0) {
    const std::string prefix = fmt::format("{}/ps{}", g.key_base, id);
    const std::string listed = fmt::format("{}", fmt::join(ranks, ","));
    if (ranks.size() > 1) {
      // The members must agree on who they are, or the mesh would wait for a rank that never
      // comes; the first member publishes its list and the others compare.
      if (set.my_rank == 0) {
        check(g.store->set(prefix + "/ranks", listed));
      } else {
        Result<std::string> theirs = g.store->wait_get(prefix + "/ranks", g.info.start_timeout);
        check(theirs.status());
        if (*theirs != listed)
          fail(mismatch_error(
              fmt::format("add_process_set: process set {} is [{}] on rank {} but [{}] on rank {}",
                          id, *theirs, ranks.front(), listed, g.info.rank)));
      }
    }
    BootstrapInfo sub = g.info;
    sub.rank = set.my_rank;
    sub.size = static_cast<int>(ranks.size());
    // The autotuner tunes the global set's traffic only: one search per job.
    runtime::RuntimeSettings settings = g.settings;
    settings.autotune = false;
    auto c = Controller::start(sub, ranks.size() > 1 ? g.store.get() : nullptr, prefix, settings,
                               *g.timeline);
    check(c.status());
    set.controller = std::move(*c);
  }
  g.sets[id] = std::move(set);
  return id;
}

void remove_process_set(ProcessSet ps) {
  Global& g = initialized_global();
  if (ps == kGlobalProcessSet) fail(invalid_argument("the global process set cannot be removed"));
  SetState set;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = find_set(g, ps);
    set = std::move(it->second);
    g.sets.erase(it);
  }
  if (set.controller != nullptr) check(set.controller->shutdown());
}

std::vector<int> process_set_ranks(ProcessSet ps) {
  Global& g = initialized_global();
  std::lock_guard<std::mutex> lock(g.mu);
  return find_set(g, ps)->second.ranks;
}

int process_set_rank(ProcessSet ps) {
  Global& g = initialized_global();
  std::lock_guard<std::mutex> lock(g.mu);
  return find_set(g, ps)->second.my_rank;
}

}  // namespace hoop
