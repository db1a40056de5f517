// bench_runtime: the runtime (hoop/hoop.h) against the raw Communicator in the same job,
// launched with hooprun:
//
//   hooprun -np 2 build/bin/bench_runtime [--reps R] [--case step|lone|large] [--runtime-only]
//
// Three cases, each repeated R times with the runtime and the Communicator interleaved (one
// of each per repetition), median times over the repetitions, on rank 0's clock after a
// barrier:
//   step:  400 tensors of 4 KiB (f32, sum): submitted asynchronously and waited for through the
//          runtime, against one synchronous Communicator allreduce per tensor;
//   lone:  one 8 B allreduce through the runtime, against one on the Communicator;
//   large: one 64 MiB allreduce through the runtime, against one on the Communicator.
// The step also times its 1.6 MB in one Communicator call (the last column): what fusion could
// reach with no negotiation and no copies. --runtime-only leaves the Communicator out, so that a
// profiler sees the runtime alone.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "bench/common/cli_parse.h"
#include "hoop/communicator.h"
#include "hoop/hoop.h"
#include "hoop/version.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Microseconds `body` takes on this rank, after a barrier on the communicator.
double timed(hoop::Communicator& comm, const std::function<void()>& body) {
  hoop::Status s = hoop::barrier(comm);
  if (!s.ok()) throw hoop::Error(s);
  const auto t0 = Clock::now();
  body();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

void check(const hoop::Status& s) {
  if (!s.ok()) throw hoop::Error(s);
}

struct Case {
  std::string name;
  std::size_t tensors;
  std::size_t floats;  // per tensor
  int reps;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hoop's runtime against the raw Communicator (launch with hooprun)"};
  app.set_version_flag("--version", hoop::version_line("bench_runtime"));
  int reps = 0;
  app.add_option("--reps", reps,
                 "Repetitions per case (0: 200 / 1000 / 10 for step / lone / large)")
      ->check(CLI::Range(0, 1 << 30).description("NONNEGATIVE"));
  std::string only;
  app.add_option("--case", only, "Run only this case: step, lone or large");
  bool runtime_only = false;
  app.add_flag("--runtime-only", runtime_only,
               "Time the runtime alone (for a profiler); the other columns read 0");
  if (const auto code = hoop::bench::parse_command_line(app, argc, argv)) return *code;
  try {
    hoop::init();
    auto comm = hoop::Communicator::create().value();
    const std::vector<Case> cases = {
        {"step: 400 x 4 KiB", 400, 1024, reps > 0 ? reps : 200},
        {"lone: 8 B", 1, 2, reps > 0 ? reps : 1000},
        {"large: 64 MiB", 1, std::size_t{16} << 20, reps > 0 ? reps : 10},
    };
    if (hoop::rank() == 0) {
      fmt::print("# bench_runtime: {} ranks, f32 sum, median of interleaved repetitions\n",
                 hoop::size());
      fmt::print(
          "| case | runtime us | communicator us | communicator / runtime | one fused call us |\n");
      fmt::print("|---|---:|---:|---:|---:|\n");
    }
    for (const Case& c : cases) {
      if (!only.empty() && c.name.rfind(only, 0) != 0) continue;
      std::vector<std::vector<float>> bufs(c.tensors, std::vector<float>(c.floats, 1.0f));
      std::vector<std::string> names;
      for (std::size_t t = 0; t < c.tensors; ++t) names.push_back(fmt::format("t{}", t));
      hoop::ReduceOptions o;
      o.op = hoop::ReduceOp::kSum;
      auto through_runtime = [&] {
        std::vector<hoop::Handle> handles;
        handles.reserve(c.tensors);
        for (std::size_t t = 0; t < c.tensors; ++t) {
          hoop::Tensor x{bufs[t].data(),
                         hoop::DataType::kF32,
                         {static_cast<std::int64_t>(c.floats)},
                         hoop::kCpuDevice};
          handles.push_back(hoop::allreduce_async(names[t], x, x, o));
        }
        for (auto& h : handles) h.wait();
      };
      auto through_comm = [&] {
        for (std::size_t t = 0; t < c.tensors; ++t) {
          hoop::AllreduceOptions a;
          a.output = bufs[t].data();
          a.count = c.floats;
          check(hoop::allreduce(*comm, a));
        }
      };
      // The floor under fusion: the same bytes in one Communicator call, in place, with no
      // copies into a fusion buffer and no negotiation.
      std::vector<float> fused(c.tensors > 1 ? c.tensors * c.floats : 0, 1.0f);
      auto through_fused = [&] {
        hoop::AllreduceOptions a;
        a.output = fused.data();
        a.count = fused.size();
        check(hoop::allreduce(*comm, a));
      };
      through_runtime();  // warm-up: negotiation fills the response cache, buffers fault in
      through_comm();
      if (!fused.empty()) through_fused();
      std::vector<double> rt;
      std::vector<double> cm;
      std::vector<double> fu;
      const bool others = !runtime_only;
      for (int r = 0; r < c.reps; ++r) {
        rt.push_back(timed(*comm, through_runtime));
        cm.push_back(others ? timed(*comm, through_comm) : 0.0);
        fu.push_back(others && !fused.empty() ? timed(*comm, through_fused) : 0.0);
      }
      if (hoop::rank() == 0) {
        const double a = median(rt);
        const double b = median(cm);
        const std::string f = fused.empty() ? "-" : fmt::format("{:.1f}", median(fu));
        fmt::print("| {} | {:.2f} | {:.2f} | {:.2f} | {} |\n", c.name, a, b, b / a, f);
      }
    }
    comm.reset();
    hoop::shutdown();
  } catch (const hoop::Error& e) {
    fmt::print(stderr, "bench_runtime: {}\n", e.status().to_string());
    return 1;
  }
  return 0;
}
