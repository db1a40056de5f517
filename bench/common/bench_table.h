// The nccl-tests command line, result table and JSON report, shared by hoop-bench and the peer
// drivers in bench/peers so that every column means the same thing whoever printed it.
//
// Flags follow nccl-tests' all_reduce_perf: -b/-e/-f choose the sizes, -n/-w the iterations,
// -c the check, -d/-o the dtype and op ("all" for every one), -r the root, plus --json FILE.
// algbw is bytes / time with GB = 1e9; busbw = algbw x bus_factor(collective, nranks), the
// factor that makes busbw comparable with the link bandwidth whatever the rank count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/core.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hoop::bench {

/// What a table measures: the collectives of hoop/communicator.h that nccl-tests has a *_perf
/// program for, plus sendrecv_perf's ring (every rank sends to rank + 1 and receives from
/// rank - 1). hoop::Collective lists call fingerprints, which point-to-point calls do not have,
/// hence a list of its own.
enum class BenchCollective : std::uint8_t {
  kAllreduce,
  kBroadcast,
  kAllgather,
  kReduceScatter,
  kAlltoall,
  kReduce,
  kGather,
  kScatter,
  kSendrecv
};
/// Every BenchCollective, in the order `--collective all` runs them.
inline constexpr BenchCollective kAllBenchCollectives[] = {
    BenchCollective::kAllreduce,     BenchCollective::kBroadcast, BenchCollective::kAllgather,
    BenchCollective::kReduceScatter, BenchCollective::kAlltoall,  BenchCollective::kReduce,
    BenchCollective::kGather,        BenchCollective::kScatter,   BenchCollective::kSendrecv};

/// "allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "reduce", "gather",
/// "scatter" or "sendrecv".
std::string_view collective_name(BenchCollective collective);
/// Parses a name as collective_name prints it; accepts "all_reduce", "bcast" and "send_recv"
/// style spellings too.
std::optional<BenchCollective> parse_collective(std::string_view name);
/// busbw / algbw for `collective` on `nranks` ranks, as nccl-tests defines it.
double bus_factor(BenchCollective collective, int nranks);
/// Whether -r/--root applies (broadcast, reduce, gather, scatter); the others print root -1.
bool is_rooted(BenchCollective collective);
/// Whether the collective reduces, so that the table has one block of rows per -o op.
bool reduces(BenchCollective collective);
/// Number of per-rank blocks in the buffer the table's size counts: the rank count for
/// allgather, reduce_scatter, alltoall, gather and scatter (whose count column is per rank),
/// one for the others.
int blocks_per_size(BenchCollective collective, int nranks);

/// Parses a byte count with an optional K, M or G suffix (powers of 1024): "8", "64M", "1G".
std::optional<std::size_t> parse_bytes(std::string_view text);

/// How the ranks' times make the table's time (nccl-tests' -a): rank 0's, the mean, the
/// fastest or the slowest rank's.
enum class Average : std::uint8_t { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

/// What to measure, as given by the nccl-tests flags.
struct BenchOptions {
  std::size_t min_bytes = 32 << 20;
  std::size_t max_bytes = 32 << 20;
  double step_factor = 2.0;
  std::size_t step_bytes = 0;  // -i: a fixed increment instead of the factor (0: the factor)
  int iters = 20;
  int warmup_iters = 5;
  int agg_iters = 1;  // -m: calls per timed iteration; the time is per call
  int check = 1;      // checked calls per variant, each on fresh inputs; 0: #wrong reads N/A
  Average average = Average::kMax;  // hoop's tables report the slowest rank unless -a says
  std::vector<DataType> dtypes{DataType::kF32};
  std::vector<ReduceOp> ops{ReduceOp::kSum};
  int root = 0;           // -1: every root in turn (-r all)
  std::string json_path;  // empty: no JSON report
  // nccl-tests flags that name GPU and thread layouts this program does not have; validate()
  // refuses values other than these, saying why.
  int nthreads = 1;
  int cudagraph = 0;
};

/// Registers nccl-tests' flags on `app` (-b -e -f -i -n -w -m -a -c -d -o -r, and -t -p -z -G,
/// which take only the values that fit one thread per rank and host calls) and --json;
/// parsing fills `options`.
void add_bench_flags(CLI::App& app, BenchOptions& options);
/// Checks what CLI11 cannot check alone (min <= max, a factor > 1 when min < max, -i or -f but
/// not both, the layout flags' values), naming the flag and why.
Status validate(const BenchOptions& options);
/// Message sizes from min to max, each a whole number of `element_size` elements (>= 1).
std::vector<std::size_t> message_sizes(const BenchOptions& options, std::size_t element_size);

/// One timed variant (out-of-place or in-place) of one table row.
struct Measurement {
  bool measured = true;     // false: the variant does not exist (sendrecv in place); prints N/A
  double time_us = 0;       // per iteration, slowest rank
  double algbw_gbps = 0;    // bytes / time, GB = 1e9
  double busbw_gbps = 0;    // algbw x bus_factor
  std::int64_t wrong = -1;  // mismatching elements over all ranks; -1: not checked
};

/// Builds a Measurement from a byte count, a time and a wrong-element count.
Measurement make_measurement(std::size_t bytes, double time_us, double bus_factor,
                             std::int64_t wrong);
/// The Measurement of a variant that does not exist.
Measurement not_measured();

/// One line of the table.
struct Row {
  std::size_t bytes = 0;
  std::size_t count = 0;
  DataType dtype = DataType::kF32;
  std::optional<ReduceOp> op;  // none for collectives that do not reduce
  int root = -1;               // -1 for rootless collectives, as nccl-tests prints
  Measurement out_of_place;
  Measurement in_place;

  /// Wrong elements over both measurements (unchecked ones count as none).
  std::int64_t wrong() const {
    return std::max<std::int64_t>(0, out_of_place.wrong) +
           std::max<std::int64_t>(0, in_place.wrong);
  }
};

/// Who ran: printed in the header comment block and stored in the JSON report.
struct RunInfo {
  std::string program;         // e.g. "peer_mpi_allreduce"
  std::string implementation;  // e.g. "Open MPI 4.1.4, pml ob1, btl tcp"
  BenchCollective collective = BenchCollective::kAllreduce;
  int nranks = 1;
  std::vector<std::string> rank_lines;  // one per rank, from local_rank_line()
};

/// "Rank  0 Pid  12345 on host": this process's line for the header's rank layout.
std::string local_rank_line(int rank);

/// Prints the table to a stream as rows arrive and keeps them for the JSON report.
class Report {
 public:
  Report(BenchOptions options, RunInfo info, std::FILE* out);

  /// Prints the "#" comment block with the settings, the rank layout and the column heads.
  void print_header();
  /// Prints "# <text>" (skipped cases and other remarks); they go to the JSON report too.
  void note(const std::string& text);
  /// Prints one row and keeps it.
  void add_row(const Row& row);
  /// Prints the closing lines (wrong total, average bus bandwidth) and writes the JSON file.
  Status finish();

  /// Mean busbw over every measurement printed so far (out-of-place and in-place, N/A left out).
  double avg_busbw_gbps() const;
  /// Sum of the wrong counts of every checked measurement.
  std::int64_t wrong_total() const;
  /// The JSON report as text.
  std::string json() const;

 private:
  BenchOptions options_;
  RunInfo info_;
  std::FILE* out_;
  std::vector<Row> rows_;
  std::vector<std::string> notes_;
};

}  // namespace hoop::bench
