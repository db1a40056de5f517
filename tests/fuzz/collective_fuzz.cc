// collective_fuzz: a rank that hooprun (or mpirun) launches on every rank of a job. All ranks
// derive the same pseudo-random cases from one seed (fuzz_case.h), run each one, and check
// every result bit for bit (fuzz_runner.h). Rank 0 prints the seed first; every failure prints
// the seed, the case index and the whole case, so that
//   hooprun -np N collective_fuzz [--hosts K] --seed S --case I
// under the same HOOP_TRANSPORT replays it. Exit 0 when every case passed on every rank.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "tests/comm/simulated_hosts.h"
#include "tests/fuzz/fuzz_case.h"
#include "tests/fuzz/fuzz_runner.h"

namespace {

using hoop::Communicator;
using hoop::DataType;
using hoop::fuzz::Case;

struct Options {
  int simulated_hosts = 0;  // --hosts
  int hosts = 0;            // simulated, or as the launcher laid them out
  std::optional<std::uint64_t> seed;
  std::uint64_t cases = 100;
  double minutes = 0;
  std::optional<std::uint64_t> only_case;
  std::size_t max_kib = 8192;
  bool verbose = false;
};

/// More failure lines than this per rank would only bury the first ones.
constexpr int kMaxPrintedFailures = 20;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

/// Broadcasts `value` from rank 0.
hoop::Status share(Communicator& comm, void* value, std::size_t bytes) {
  hoop::BroadcastOptions o;
  o.buffer = value;
  o.count = bytes;
  o.dtype = DataType::kU8;
  return hoop::broadcast(comm, o);
}

class Fuzzer {
 public:
  Fuzzer(Communicator& comm, const Options& opt, std::uint64_t seed)
      : comm_(comm), opt_(opt), seed_(seed), runner_(comm) {
    shape_.size = comm.size();
    shape_.hierarchical = hoop::comm_check::hierarchical_possible(comm.size(), opt.hosts);
    shape_.max_bytes = opt.max_kib << 10;
  }

  /// Runs case `index`; false when its collective failed (the job cannot go on then).
  bool run_case(std::uint64_t index) {
    const Case c = hoop::fuzz::make_case(seed_, index, shape_);
    if (opt_.verbose && comm_.rank() == 0) fmt::print("collective_fuzz: {}\n", describe(c));
    std::vector<std::string> problems;
    ++cases_;
    const hoop::Status s = runner_.run(c, problems);
    if (!s.ok()) problems.push_back("the call failed: " + s.to_string());
    if (!problems.empty()) {
      if (++failed_ <= kMaxPrintedFailures) {
        for (const std::string& p : problems)
          fmt::print("FAIL rank {}: {}: {}\n", comm_.rank(), describe(c), p);
        fmt::print("FAIL rank {}: replay with: {}\n", comm_.rank(), replay_command(index));
      }
      std::fflush(stdout);
    }
    return s.ok();
  }

  /// Whether rank 0 wants another case; every rank gets its answer, so all stop together.
  bool another(std::chrono::steady_clock::time_point end) {
    std::uint8_t go = std::chrono::steady_clock::now() < end ? 1 : 0;
    const hoop::Status s = share(comm_, &go, 1);
    if (!s.ok())
      fmt::print("FAIL rank {}: deciding whether to go on: {}\n", comm_.rank(), s.to_string());
    return s.ok() && go != 0;
  }

  /// Prints this rank's and the job's totals; the process's exit code.
  int finish() {
    std::int64_t totals[2] = {static_cast<std::int64_t>(cases_), failed_};
    hoop::AllreduceOptions o;
    o.output = totals;
    o.count = 2;
    o.dtype = DataType::kI64;
    const hoop::Status s = hoop::allreduce(comm_, o);
    if (!s.ok()) {
      fmt::print("FAIL rank {}: adding up the results: {}\n", comm_.rank(), s.to_string());
      return 1;
    }
    fmt::print("collective_fuzz: rank {}: {} cases, {} failed\n", comm_.rank(), cases_, failed_);
    if (comm_.rank() == 0) {
      fmt::print("collective_fuzz: seed {}: {} cases on {} ranks, {} failures on any rank\n", seed_,
                 cases_, comm_.size(), totals[1]);
    }
    return totals[1] == 0 ? 0 : 1;
  }

 private:
  /// The command that runs case `index` alone on a job like this one: the same launcher,
  /// ranks, hosts and settings that change how the case runs.
  std::string replay_command(std::uint64_t index) const {
    const std::string transport = env_or("HOOP_TRANSPORT", "auto");
    std::string env = "HOOP_TRANSPORT=" + transport;
    for (const char* name : {"HOOP_ALGO", "HOOP_HIERARCHICAL_SEGMENT_BYTES", "UCX_TLS"}) {
      if (const char* v = std::getenv(name)) env += fmt::format(" {}={}", name, v);
    }
    return fmt::format(
        "{} {} -np {} collective_fuzz{} --max-kib {} --seed {} --case {}", env,
        transport == "mpi" ? "mpirun" : "hooprun", comm_.size(),
        opt_.simulated_hosts > 0 ? fmt::format(" --hosts {}", opt_.simulated_hosts) : "",
        opt_.max_kib, seed_, index);
  }

  Communicator& comm_;
  const Options& opt_;
  std::uint64_t seed_;
  hoop::fuzz::JobShape shape_;
  hoop::fuzz::CaseRunner runner_;
  std::uint64_t cases_ = 0;
  std::int64_t failed_ = 0;
};

int run(const Options& opt) {
  auto created = Communicator::create();
  if (!created.ok()) {
    fmt::print("FAIL create: {}\n", created.status().to_string());
    return 1;
  }
  Communicator& comm = **created;
  // Rank 0's seed is every rank's, so a job without --seed still runs one sequence.
  std::uint64_t seed =
      opt.seed ? *opt.seed : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  if (auto s = share(comm, &seed, sizeof seed); !s.ok()) {
    fmt::print("FAIL rank {}: sharing the seed: {}\n", comm.rank(), s.to_string());
    return 1;
  }
  if (comm.rank() == 0) {
    fmt::print(
        "collective_fuzz: seed {} on {} ranks, HOOP_TRANSPORT={}, hosts {}, cases up to "
        "{} KiB\n",
        seed, comm.size(), env_or("HOOP_TRANSPORT", "auto"), opt.hosts, opt.max_kib);
    std::fflush(stdout);
  }
  Fuzzer fuzzer(comm, opt, seed);
  bool ok = true;
  if (opt.only_case) {
    ok = fuzzer.run_case(*opt.only_case);
  } else if (opt.minutes > 0) {
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double, std::ratio<60>>(opt.minutes));
    for (std::uint64_t i = 0; ok && fuzzer.another(end); ++i) ok = fuzzer.run_case(i);
  } else {
    for (std::uint64_t i = 0; ok && i < opt.cases; ++i) ok = fuzzer.run_case(i);
  }
  std::fflush(stdout);
  // A failed call aborted the transport: there are no totals to add up.
  return ok ? fuzzer.finish() : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"Runs pseudo-random collective cases on every rank and checks them bit for bit."};
  app.add_option("--hosts", opt.simulated_hosts,
                 "Simulate this many hosts of consecutive ranks (HOOP_HOST_ID): shared memory "
                 "inside a host, and the hierarchical allreduce when they hold equal rank counts");
  app.add_option("--seed", opt.seed, "Seed of the case sequence (default: a random one)");
  auto* cases = app.add_option("--cases", opt.cases, "Run cases 0 .. N-1 (default 100)");
  auto* minutes = app.add_option("--minutes", opt.minutes, "Run cases for this many minutes");
  app.add_option("--case", opt.only_case, "Run only this case (replays a failure)")
      ->excludes(cases)
      ->excludes(minutes);
  minutes->excludes(cases);
  app.add_option("--max-kib", opt.max_kib, "Largest buffer of a case, in KiB (default 8192)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 22));
  app.add_flag("--verbose", opt.verbose, "Rank 0 prints every case before running it");
  CLI11_PARSE(app, argc, argv);
  if (opt.simulated_hosts > 0) {
    opt.hosts = opt.simulated_hosts;
    hoop::comm_check::simulate_hosts(opt.hosts);
  } else if (const char* cross = std::getenv("HOOP_CROSS_SIZE")) {
    opt.hosts = std::atoi(cross);  // real hosts, as the launcher laid them out (hooprun -H)
  }
  const int rc = run(opt);
  std::fflush(stdout);
  return rc;
}
