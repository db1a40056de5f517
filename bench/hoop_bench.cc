// hoop-bench: hoop's collectives timed and checked like nccl-tests' *_perf programs, launched
// with hooprun. Same flags, table and JSON report as the peer drivers in bench/peers, so
// bench/run_peers.sh can put hoop next to Open MPI and Gloo.
//
//   build/bin/hooprun -np 2 build/bin/hoop-bench -b 8 -e 64M -f 2 --collective allreduce
//       [-r ROOT] [--algo auto|ring|recursive_doubling|rabenseifner|tree|hierarchical]
//       [--transport auto|tcp|shm|ucx|mpi] [-g] [-T SECONDS] [--json FILE]
//
// nccl-tests' own flags keep their meaning (-i step bytes, -m calls per iteration, -a how the
// ranks' times combine, -c checked calls, -r all); those of thread and GPU layouts take the
// values that fit one rank per process and per GPU, and anything else is an error saying why.
// -g/--device runs the collectives on CUDA device buffers (the device of local rank % device
// count; HOOP_GPU_BACKEND picks NCCL, CUDA IPC or staging), written and checked through host
// copies outside the timed iterations; `-g 1` is the same.
//
// Exit status: 0 all checks passed, 2 bad arguments, 3 wrong results, 1 anything else.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/common/collective_bench.h"
#include "bench/hoop_bench_device.h"
#include "bench/hoop_bench_peer.h"
#include "hoop/communicator.h"
#include "hoop/rendezvous.h"
#include "hoop/version.h"

namespace hoop::bench {
namespace {

constexpr char kProgram[] = "hoop-bench";

struct Flags {
  BenchOptions bench;
  std::string collective = "allreduce";
  std::string algo = "auto";
  std::string transport;  // empty: HOOP_TRANSPORT
  int ngpus = 0;          // -g [N]: buffers on this rank's CUDA device (N must be 1); 0: host
  double timeout_s = 0;   // -T: each collective's deadline; 0: HOOP_TIMEOUT_SECONDS
  bool nonblocking = false;  // --nonblocking: the i-forms and their waits
};

// This process's rank for its messages, before a communicator exists: what the launcher says
// (hooprun, mpirun, Slurm), else 0.
int launcher_rank() {
  const Result<BootstrapInfo> info = bootstrap_from_env();
  return info.ok() ? info->rank : 0;
}

// "[rank] " before this rank's own messages; nothing under hooprun, which labels every line of
// a rank's output already.
std::string rank_prefix(int rank) {
  const Result<BootstrapInfo> info = bootstrap_from_env();
  if (info.ok() && info->launcher == "hooprun") return "";
  return fmt::format("[{}] ", rank);
}

// Every rank finds the same argument error (they all see the same argv) and says so with its
// own label: the launcher's last line then quotes a rank whose stderr explains the failure.
int usage_error(const std::string& message) {
  fmt::print(stderr, "{}{}: {}\n", rank_prefix(launcher_rank()), kProgram, message);
  return 2;
}

// With --collective all, each collective's report goes to FILE with the collective's name
// before the extension (r.json -> r.allgather.json), since one report holds one table.
std::string json_path_for(const std::string& path, BenchCollective collective, bool several) {
  if (path.empty() || !several) return path;
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string stem = has_ext ? path.substr(0, dot) : path;
  const std::string ext = has_ext ? path.substr(dot) : "";
  return fmt::format("{}.{}{}", stem, collective_name(collective), ext);
}

// Parses the flags on every rank (they see the same argv, so they agree); returns the exit
// code on --help or a parse error.
std::optional<int> parse_flags(int argc, char** argv, Flags& flags) {
  CLI::App app{"hoop's collectives, timed and checked like nccl-tests' *_perf programs"};
  app.set_version_flag("--version", hoop::version_line("hoop-bench"));
  add_bench_flags(app, flags.bench);
  app.add_option("--collective", flags.collective,
                 "allreduce, broadcast, allgather, reduce_scatter, alltoall, reduce, gather, "
                 "scatter, sendrecv, or all (sendrecv only with 2 ranks or more)")
      ->check([](const std::string& name) -> std::string {
        if (name == "all" || parse_collective(name)) return "";
        return fmt::format("unknown collective '{}'", name);
      })
      ->capture_default_str();
  app.add_option("--algo", flags.algo,
                 "Allreduce algorithm: auto (cost model, or HOOP_ALGO), ring, "
                 "recursive_doubling, rabenseifner, or any other hoop knows")
      ->check([](const std::string& name) -> std::string {
        if (parse_algorithm(name)) return "";
        return fmt::format("unknown allreduce algorithm '{}'", name);
      })
      ->capture_default_str();
  app.add_option("--transport", flags.transport,
                 "Transport between ranks: auto (shared memory within a host, ucx or tcp "
                 "across hosts), tcp, shm, ucx (UCX_TLS picks UCX's fabric) or mpi (under "
                 "mpirun); default: HOOP_TRANSPORT, else auto")
      ->check(CLI::IsMember({"auto", "tcp", "shm", "ucx", "mpi"}));
  app.add_option("-g,--ngpus,--device", flags.ngpus,
                 "[N] Run the collectives on CUDA device buffers (device: local rank % device "
                 "count), written and checked through host copies. N is nccl-tests' GPUs per "
                 "thread: 1, since every rank drives one GPU (start one rank per GPU)")
      ->expected(0, 1)
      ->default_str("1")
      ->option_text("[N]");  // host buffers unless given; a bare -g means 1
  app.add_flag("--nonblocking", flags.nonblocking,
               "Time the non-blocking forms (iallreduce, ...) each followed by its wait: the "
               "cost of handing a call to the communicator's thread and back");
  app.add_option("-T,--timeout", flags.timeout_s,
                 "Seconds each collective may take before every rank fails naming the ranks "
                 "it waited for [default: HOOP_TIMEOUT_SECONDS]")
      ->check(CLI::Range(0.001, 86400.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(fmt::format("{} (run with --help for the options)", e.what()));
  }
  if (flags.ngpus > 1)
    return usage_error(fmt::format(
        "-g {}: every rank drives one GPU; start {} times the ranks instead (hooprun -np), one "
        "per GPU",
        flags.ngpus, flags.ngpus));
  if (flags.ngpus < 0) return usage_error(fmt::format("-g {}: expected 1", flags.ngpus));
  if (const Status s = validate(flags.bench); !s.ok()) return usage_error(s.message());
  return std::nullopt;
}

int exit_code(const Status& status, int rank) {
  // Every rank says what it found, with its own label (bad arguments are found alike on every
  // rank; anything else may differ between them).
  fmt::print(stderr, "{}{}: {}\n", rank_prefix(rank), kProgram, status.to_string());
  return status.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

int run(int argc, char** argv) {
  Flags flags;
  if (const std::optional<int> code = parse_flags(argc, argv, flags)) return *code;
  const Algorithm algorithm = *parse_algorithm(flags.algo);
  const bool every = flags.collective == "all";
  std::vector<BenchCollective> collectives;
  if (every) {
    collectives.assign(std::begin(kAllBenchCollectives), std::end(kAllBenchCollectives));
  } else {
    collectives.push_back(*parse_collective(flags.collective));
  }

  int device = kCpuDevice;
  if (flags.ngpus > 0) {
    // Before the communicator: a rank without a device fails at once rather than in a collective.
    Result<int> chosen = choose_device();
    if (!chosen.ok()) return exit_code(chosen.status(), launcher_rank());
    device = *chosen;
  }

  CommunicatorOptions comm_options;
  comm_options.transport = flags.transport;
  if (flags.timeout_s > 0)
    comm_options.timeout =
        std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(flags.timeout_s * 1000)));
  Result<std::unique_ptr<Communicator>> comm = Communicator::create(comm_options);
  if (!comm.ok()) return exit_code(comm.status(), launcher_rank());
  HoopPeer peer(std::move(*comm), algorithm, device, flags.nonblocking);

  std::int64_t wrong = 0;
  for (const BenchCollective collective : collectives) {
    // One rank has no next rank to send to: `all` leaves sendrecv out there.
    if (every && collective == BenchCollective::kSendrecv && peer.size() < 2) {
      if (peer.rank() == 0) fmt::print("# sendrecv skipped: it needs 2 ranks or more\n");
      continue;
    }
    BenchOptions options = flags.bench;
    options.json_path = json_path_for(options.json_path, collective, every);
    const Result<std::int64_t> result =
        run_collective_bench(options, peer, collective, kProgram, stdout);
    if (!result.ok()) return exit_code(result.status(), peer.rank());
    wrong += *result;
  }
  return wrong == 0 ? 0 : 3;
}

}  // namespace
}  // namespace hoop::bench

int main(int argc, char** argv) { return hoop::bench::run(argc, argv); }
