// One rank of a chaos case (tests/chaos/chaos_test.cc): a few good steps, then the fault the
// case names, played by rank 1 (or by every rank, for mismatches). Every rank that sees a
// failure prints "rank R: failed after S s: <cause>" and exits 3; a rank that finishes prints
// "rank R: ok". The seconds count from the start of the call that failed, so the test can
// tabulate the time to the error.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/hoop.h"

namespace {

using hoop::Clock;
using hoop::DataType;
using hoop::ReduceOp;
using hoop::Status;

int g_rank = -1;
Clock::time_point g_call_start = Clock::now();

/// Marks the start of the call whose failure the case is about.
void start_call() { g_call_start = Clock::now(); }

bool g_runtime = false;

[[noreturn]] void report_failure(const std::string& cause) {
  const double s = std::chrono::duration<double>(Clock::now() - g_call_start).count();
  std::printf("rank %d: failed after %.3f s: %s\n", g_rank, s, cause.c_str());
  std::fflush(stdout);
  // As an application that catches the error would: shut the runtime down and exit normally,
  // running every destructor (a crash there once followed mismatches).
  if (g_runtime && std::getenv("CHAOS_NO_SHUTDOWN") == nullptr) {
    try {
      hoop::shutdown();
    } catch (const hoop::Error&) {
    }
  }
  std::exit(3);
}

void check(const Status& s) {
  if (!s.ok()) report_failure(s.to_string());
}

[[noreturn]] void finish() {
  std::printf("rank %d: ok\n", g_rank);
  std::fflush(stdout);
  std::_Exit(0);
}

/// Good steps before the fault: 3, or CHAOS_WARM_UP_STEPS (0: the fault comes first).
int warm_up_steps() {
  const char* v = std::getenv("CHAOS_WARM_UP_STEPS");
  return v != nullptr ? std::atoi(v) : 3;
}

/// What rank 1 does to the job.
void stop_self() { ::raise(SIGSTOP); }
void kill_self() { ::raise(SIGKILL); }

// --- the Communicator ---------------------------------------------------------------------

Status allreduce(hoop::Communicator& c, std::vector<float>& v, DataType dtype = DataType::kF32,
                 ReduceOp op = ReduceOp::kSum, std::size_t count = 0) {
  hoop::AllreduceOptions o;
  o.input = o.output = v.data();
  o.count = count != 0 ? count : v.size();
  o.dtype = dtype;
  o.op = op;
  return hoop::allreduce(c, o);
}

void comm_case(const std::string& name) {
  auto made = hoop::Communicator::create();
  check(made.status());
  hoop::Communicator& c = **made;
  g_rank = c.rank();
  const bool odd = c.rank() == 1;
  std::vector<float> v(64, 1.0f);
  for (int step = 0; step < warm_up_steps(); ++step) check(allreduce(c, v));
  start_call();
  if (name == "comm_dtype") {
    check(allreduce(c, v, odd ? DataType::kI32 : DataType::kF32));
  } else if (name == "comm_op") {
    check(allreduce(c, v, DataType::kF32, odd ? ReduceOp::kMax : ReduceOp::kSum));
  } else if (name == "comm_count") {
    check(allreduce(c, v, DataType::kF32, ReduceOp::kSum, odd ? 63 : 64));
  } else if (name == "comm_kind") {
    // Rank 1 skips the allreduce the others make before an allgather of the same bytes.
    std::vector<float> all(64 * static_cast<std::size_t>(c.size()));
    if (!odd) check(allreduce(c, v));
    hoop::AllgatherOptions o;
    o.input = v.data();
    o.output = all.data();
    o.count = v.size();
    check(hoop::allgather(c, o));
  } else if (name == "comm_root") {
    // Broadcasts whose ranks disagree on the root may only send; the barrier after them fails.
    hoop::BroadcastOptions o;
    o.buffer = v.data();
    o.count = v.size();
    o.root = odd ? 1 : 0;
    check(hoop::broadcast(c, o));
    check(hoop::barrier(c));
  } else if (name == "comm_root_ahead") {
    // As comm_root, from the sixth of 40 broadcasts before the barrier: over shared memory
    // each rank runs ahead through its small slots (up to HOOP_SHM_RUN_AHEAD calls), the
    // barrier finds the digests of the calls before it differ, and the sixth is found by
    // comparing the calls one by one.
    hoop::BroadcastOptions o;
    o.buffer = v.data();
    o.count = v.size();
    for (int i = 0; i < 40; ++i) {
      o.root = odd && i >= 5 ? 1 : 0;
      check(hoop::broadcast(c, o));
    }
    check(hoop::barrier(c));
  } else if (name == "comm_steady") {
    // A job that keeps working for CHAOS_STEADY_SECONDS (default 10), checking every result,
    // while the test attacks its listening ports; with CHAOS_STEADY_FILE, until that file
    // exists (the test's attacks are over), CHAOS_STEADY_SECONDS then being only a bound.
    const char* secs = std::getenv("CHAOS_STEADY_SECONDS");
    const char* file = std::getenv("CHAOS_STEADY_FILE");
    const auto until = Clock::now() + std::chrono::seconds(secs != nullptr ? std::atoi(secs) : 10);
    auto time_is_up = [&] {
      return Clock::now() >= until || (file != nullptr && ::access(file, F_OK) == 0);
    };
    // Each rank's clock runs out at another step, and a rank that stopped alone would meet the
    // others' next allreduce with its barrier. So the last element carries "my time is up"
    // (0 or 1): every rank reads the same sum and they all stop after the same step.
    constexpr std::size_t kValues = 4096;
    std::vector<float> w(kValues + 1);
    for (int step = 0;; ++step) {
      for (std::size_t i = 0; i < kValues; ++i)
        w[i] = static_cast<float>((i + step + c.rank()) % 7);
      w[kValues] = time_is_up() ? 1.0f : 0.0f;
      check(allreduce(c, w));
      for (std::size_t i = 0; i < kValues; ++i) {
        float want = 0;
        for (int r = 0; r < c.size(); ++r) want += static_cast<float>((i + step + r) % 7);
        if (w[i] != want)
          report_failure(fmt::format("step {} element {}: {} instead of {}", step, i, w[i], want));
      }
      if (w[kValues] > 0 && step >= 9) break;
    }
  } else if (name == "comm_kill_large") {
    // Rank 1 dies in the middle of 4 MiB allreduces, which on one host read the peers' memory
    // (cross-memory attach): a survivor whose read of a third rank fails because that rank
    // already aborted must still name rank 1, not the failed read.
    std::vector<float> big(std::size_t{1} << 20, 1.0f);
    if (odd) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        kill_self();
      }).detach();
    }
    for (int step = 0; step < 1000; ++step) check(allreduce(c, big));
  } else if (name == "comm_kill") {
    if (odd) kill_self();
    check(allreduce(c, v));
  } else if (name == "comm_split_kill") {
    // The job's ranks in reverse order in a split communicator, and rank 1 dies: the survivors'
    // errors name it in the split's numbering, with the job's in brackets.
    auto group = hoop::split(c, 0, -c.rank());
    check(group.status());
    if (odd) kill_self();
    check(allreduce(**group, v));
  } else if (name == "comm_p2p_kill") {
    // Every other rank waits for a message from rank 1, which dies: each names it.
    if (odd) kill_self();
    check(hoop::recv(c, {.data = v.data(), .count = v.size(), .peer = 1}));
  } else if (name == "comm_rooted_kill") {
    // The rooted collectives with rank 1 dead: the root's reduce fails naming it; a rank whose
    // reduce and gather only sent learns the cause from the root's abort in its scatter.
    if (odd) kill_self();
    std::vector<float> all(v.size() * static_cast<std::size_t>(c.size()));
    check(hoop::reduce(c, {.input = v.data(), .output = all.data(), .count = v.size()}));
    check(hoop::gather(c, {.input = v.data(), .output = all.data(), .count = v.size()}));
    check(hoop::scatter(c, {.input = all.data(), .output = v.data(), .count = v.size()}));
  } else if (name == "comm_async_kill") {
    // Non-blocking calls in flight on the communicator and on a dup of it when rank 1 dies:
    // none may succeed, and the first to fail names rank 1 (the rest fail with its cause).
    auto copy = hoop::dup(c);
    check(copy.status());
    if (odd) kill_self();
    std::vector<std::vector<float>> bufs(4, v);
    std::vector<hoop::Request> pending;
    for (std::size_t k = 0; k < bufs.size(); ++k)
      pending.push_back(hoop::iallreduce(k % 2 == 1 ? **copy : c,
                                         {.output = bufs[k].data(), .count = bufs[k].size()}));
    Status first;
    for (hoop::Request& r : pending) {
      const Status s = r.wait();
      if (s.ok()) report_failure("a call pending when rank 1 died succeeded");
      if (first.ok()) first = s;
    }
    check(first);
  } else if (name == "comm_stop") {
    if (odd) stop_self();
    check(allreduce(c, v));
  } else if (name == "comm_exit") {
    if (odd) finish();
    check(allreduce(c, v));
  } else {
    report_failure("unknown case " + name);
  }
  // A case that fails on some ranks only: the others fail in their next call at the latest.
  start_call();
  check(hoop::barrier(c));
  // A rank that ends well shuts its transport down in order (a goodbye to every peer): finish()
  // alone would cut connections a slower peer is still reading its last barrier message from.
  made->reset();
  finish();
}

// --- the runtime -----------------------------------------------------------------------------

hoop::Tensor tensor(std::vector<float>& v, DataType dtype = DataType::kF32,
                    std::vector<std::int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(v.size())};
  return hoop::Tensor{v.data(), dtype, shape, hoop::kCpuDevice};
}

/// Runs `body`, turning the runtime's exception into the case's report.
void guarded(const std::function<void()>& body) {
  try {
    body();
  } catch (const hoop::Error& e) {
    report_failure(e.status().to_string());
  }
}

void runtime_case(const std::string& name) {
  g_runtime = true;
  guarded([] { hoop::init(); });
  g_rank = hoop::rank();
  const bool odd = g_rank == 1;
  std::vector<float> v(64, 1.0f);
  guarded([&] {
    for (int step = 0; step < warm_up_steps(); ++step)
      hoop::allreduce(fmt::format("step.{}", step), tensor(v), tensor(v));
  });
  start_call();
  guarded([&] {
    hoop::ReduceOptions o;
    if (name == "rt_dtype") {
      hoop::allreduce("t", tensor(v, odd ? DataType::kI32 : DataType::kF32),
                      tensor(v, odd ? DataType::kI32 : DataType::kF32));
    } else if (name == "rt_op") {
      o.op = odd ? ReduceOp::kMax : ReduceOp::kSum;
      hoop::allreduce("t", tensor(v), tensor(v), o);
    } else if (name == "rt_shape") {
      const std::vector<std::int64_t> shape =
          odd ? std::vector<std::int64_t>{8, 8} : std::vector<std::int64_t>{64};
      hoop::allreduce("t", tensor(v, DataType::kF32, shape), tensor(v, DataType::kF32, shape));
    } else if (name == "rt_kill") {
      if (odd) kill_self();
      hoop::allreduce("t", tensor(v), tensor(v));
    } else if (name == "rt_stop_idle") {
      // Rank 1 stops between steps, with nothing outstanding; the others' next step fails.
      if (odd) stop_self();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      start_call();
      hoop::allreduce("t", tensor(v), tensor(v));
    } else if (name == "rt_stop_busy") {
      // Rank 1 stops with a tensor submitted.
      if (odd) {
        hoop::Handle h = hoop::allreduce_async("t", tensor(v), tensor(v));
        stop_self();
        h.wait();
      } else {
        hoop::allreduce("t", tensor(v), tensor(v));
      }
    } else if (name == "rt_loop") {
      // Every rank loops over allreduces until the job fails around it (a link cut from
      // outside: tests/netns); "looping" says the job is up.
      std::printf("rank %d: looping\n", g_rank);
      std::fflush(stdout);
      for (int step = 0;; ++step) {
        start_call();
        hoop::allreduce(fmt::format("loop.{}", step % 8), tensor(v), tensor(v));
      }
    } else if (name == "rt_end_without_shutdown") {
      // Every rank ends its program without shutdown(), as most Horovod scripts do; the even
      // ranks (the coordinator among them) first, while the odd ones still idle: no rank may
      // print an error, and every rank exits 0.
      hoop::allreduce("t", tensor(v), tensor(v));
      if (odd) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::printf("rank %d: ok\n", g_rank);
      std::fflush(stdout);
      std::exit(0);  // exit handlers run, as after main returns
    } else if (name == "rt_exit") {
      // Rank 1's process ends without a shutdown.
      if (odd) finish();
      hoop::barrier();
    } else if (name == "rt_shutdown") {
      // Rank 1 shuts its runtime down early and stays alive; the others are in a barrier.
      if (odd) {
        hoop::shutdown();
        std::this_thread::sleep_for(std::chrono::seconds(30));
        finish();
      }
      hoop::barrier();
    } else if (name == "rt_skip_shutdown") {
      // Rank 1 skips a tensor and then shuts down.
      if (!odd) hoop::allreduce("t", tensor(v), tensor(v));
      hoop::shutdown();
      if (odd) {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        finish();
      }
    } else if (name == "rt_skip_alive") {
      // Rank 1 skips a tensor and stays alive: the stall limit ends the job.
      if (odd) {
        // Longer than the case's HOOP_STALL_SHUTDOWN_SECONDS: the next call sees the failure.
        std::this_thread::sleep_for(std::chrono::seconds(3));
        hoop::allreduce("late", tensor(v), tensor(v));
      } else {
        hoop::allreduce("t", tensor(v), tensor(v));
      }
    } else {
      report_failure("unknown case " + name);
    }
    start_call();
    hoop::barrier();
    hoop::shutdown();
  });
  finish();
}

}  // namespace

int main(int argc, char** argv) {
  // hooprun ends the job once one rank has failed; every rank reports its own cause first.
  // CHAOS_KEEP_SIGTERM=1 leaves SIGTERM's default, as a real program has, for the cases that
  // check that hooprun's teardown waits for the ranks' own reports.
  const char* keep_term = std::getenv("CHAOS_KEEP_SIGTERM");
  if (keep_term == nullptr || std::string(keep_term) != "1") std::signal(SIGTERM, SIG_IGN);
  // CHAOS_START_STOPPED=1: the rank stops itself before it touches the job, so that a test
  // decides when each rank goes on (listener_attack_test holds them at their listeners).
  const char* stopped = std::getenv("CHAOS_START_STOPPED");
  if (stopped != nullptr && std::string(stopped) == "1") ::raise(SIGSTOP);
  const std::string name = argc > 1 ? argv[1] : "";
  if (name.rfind("comm_", 0) == 0) comm_case(name);
  if (name.rfind("rt_", 0) == 0) runtime_case(name);
  std::printf("unknown case %s\n", name.c_str());
  return 2;
}
