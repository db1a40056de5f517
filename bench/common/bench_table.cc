#include "bench/common/bench_table.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

namespace hoop::bench {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// nccl-tests narrows the precision as times grow so the column keeps its width.
std::string format_time(double time_us) {
  if (time_us >= 10000.0) return fmt::format("{:7.0f}", time_us);
  if (time_us >= 100.0) return fmt::format("{:7.1f}", time_us);
  return fmt::format("{:7.2f}", time_us);
}

std::string format_wrong(std::int64_t wrong) {
  return wrong < 0 ? std::string("N/A") : std::to_string(wrong);
}

nlohmann::json measurement_json(const Measurement& m) {
  if (!m.measured) return nullptr;
  nlohmann::json j{
      {"time_us", m.time_us}, {"algbw_gbps", m.algbw_gbps}, {"busbw_gbps", m.busbw_gbps}};
  j["wrong"] = m.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(m.wrong);
  return j;
}

// "all" selects every value; otherwise a comma-separated list of names.
template <typename T, typename Parse, std::size_t N>
std::vector<T> parse_list(const std::string& text, const T (&all)[N], Parse parse,
                          std::string_view what) {
  if (lower(text) == "all") return std::vector<T>(std::begin(all), std::end(all));
  std::vector<T> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, end - start);
    const auto value = parse(name);
    if (!value) throw CLI::ValidationError(fmt::format("unknown {} '{}'", what, name));
    out.push_back(*value);
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string_view collective_name(BenchCollective collective) {
  switch (collective) {
    case BenchCollective::kAllreduce:
      return "allreduce";
    case BenchCollective::kBroadcast:
      return "broadcast";
    case BenchCollective::kAllgather:
      return "allgather";
    case BenchCollective::kReduceScatter:
      return "reduce_scatter";
    case BenchCollective::kAlltoall:
      return "alltoall";
    case BenchCollective::kReduce:
      return "reduce";
    case BenchCollective::kGather:
      return "gather";
    case BenchCollective::kScatter:
      return "scatter";
    case BenchCollective::kSendrecv:
      return "sendrecv";
  }
  return "unknown";
}

std::optional<BenchCollective> parse_collective(std::string_view name) {
  std::string key = lower(name);
  std::erase(key, '_');
  std::erase(key, '-');
  if (key == "bcast") return BenchCollective::kBroadcast;
  for (const BenchCollective collective : kAllBenchCollectives) {
    std::string known(collective_name(collective));
    std::erase(known, '_');
    if (key == known) return collective;
  }
  return std::nullopt;
}

double bus_factor(BenchCollective collective, int nranks) {
  const double n = nranks;
  switch (collective) {
    case BenchCollective::kAllreduce:
      return 2.0 * (n - 1.0) / n;
    case BenchCollective::kAllgather:
    case BenchCollective::kReduceScatter:
    case BenchCollective::kAlltoall:
    case BenchCollective::kGather:
    case BenchCollective::kScatter:
      return (n - 1.0) / n;
    case BenchCollective::kBroadcast:
    case BenchCollective::kReduce:
    case BenchCollective::kSendrecv:
      return 1.0;
  }
  return 1.0;
}

bool is_rooted(BenchCollective collective) {
  return collective == BenchCollective::kBroadcast || collective == BenchCollective::kReduce ||
         collective == BenchCollective::kGather || collective == BenchCollective::kScatter;
}

bool reduces(BenchCollective collective) {
  return collective == BenchCollective::kAllreduce ||
         collective == BenchCollective::kReduceScatter || collective == BenchCollective::kReduce;
}

int blocks_per_size(BenchCollective collective, int nranks) {
  switch (collective) {
    case BenchCollective::kAllgather:
    case BenchCollective::kReduceScatter:
    case BenchCollective::kAlltoall:
    case BenchCollective::kGather:
    case BenchCollective::kScatter:
      return nranks;
    case BenchCollective::kAllreduce:
    case BenchCollective::kBroadcast:
    case BenchCollective::kReduce:
    case BenchCollective::kSendrecv:
      return 1;
  }
  return 1;
}

std::optional<std::size_t> parse_bytes(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::size_t shift = 0;
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    default:
      break;
  }
  if (shift != 0) text.remove_suffix(1);
  if (text.empty() || text.size() > 12) return std::nullopt;
  std::size_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::size_t>(c - '0');
  }
  return value << shift;
}

void add_bench_flags(CLI::App& app, BenchOptions& options) {
  const auto bytes_flag = [&app](const char* names, std::size_t& target, const char* help) {
    app.add_option_function<std::string>(
           names,
           [&target, names](const std::string& text) {
             const auto value = parse_bytes(text);
             if (!value)
               throw CLI::ValidationError(names, "expected bytes such as 8, 512K, 64M or 1G");
             target = *value;
           },
           help)
        ->default_str(std::to_string(target));
  };
  bytes_flag("-b,--minbytes", options.min_bytes, "Smallest message size in bytes (K/M/G suffix)");
  bytes_flag("-e,--maxbytes", options.max_bytes, "Largest message size in bytes (K/M/G suffix)");
  CLI::Option* factor =
      app.add_option_function<double>(
             "-f,--stepfactor",
             [&options](double f) {
               options.step_factor = f;
               // As in nccl-tests, a factor above 1 wins over --stepbytes.
               if (f > 1.0) options.step_bytes = 0;
             },
             "Multiply the size by this each step; above 1 it wins over --stepbytes, as in "
             "nccl-tests")
          ->default_str(fmt::format("{:g}", options.step_factor));
  app.add_option_function<std::string>(
      "-i,--stepbytes",
      [&options, factor](const std::string& text) {
        const auto value = parse_bytes(text);
        if (!value || *value == 0)
          throw CLI::ValidationError("--stepbytes", "expected a positive byte count such as 1M");
        // CLI11 runs the callbacks in the order the options are declared, so -f's is done.
        if (factor->count() > 0 && options.step_factor > 1.0) return;
        options.step_bytes = *value;
      },
      "Add this many bytes each step instead of multiplying (K/M/G suffix; a --stepfactor "
      "above 1 given with it wins)");
  app.add_option("-n,--iters", options.iters, "Timed iterations per size")
      ->check(CLI::Range(1, 1 << 30).description("POSITIVE"))
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", options.warmup_iters, "Untimed warm-up iterations per size")
      ->check(CLI::Range(0, 1 << 30).description("NONNEGATIVE"))
      ->capture_default_str();
  app.add_option("-m,--agg_iters", options.agg_iters,
                 "Calls per timed iteration, back to back; the time column is per call")
      ->check(CLI::Range(1, 1 << 30).description("POSITIVE"))
      ->capture_default_str();
  app.add_option_function<int>(
         "-a,--average", [&options](int value) { options.average = static_cast<Average>(value); },
         "The time over the ranks: 0 rank 0's, 1 the mean, 2 the fastest, 3 the slowest rank's")
      ->check(CLI::Range(0, 3))
      ->default_str("3");
  app.add_option("-c,--check", options.check,
                 "Checked calls per size and variant, each on fresh inputs (0: no check)")
      ->check(CLI::Range(0, 1 << 30).description("NONNEGATIVE"))
      ->capture_default_str();
  app.add_option_function<std::string>(
         "-d,--datatype",
         [&options](const std::string& text) {
           try {
             options.dtypes = parse_list(text, kAllDataTypes, parse_dtype, "datatype");
           } catch (const CLI::ValidationError& e) {
             throw CLI::ValidationError(
                 std::string(e.what()) +
                 " (hoop's types: u8 i8 i16 i32 i64 f16 bf16 f32 f64; nccl-tests' uint32 and "
                 "uint64 have no counterpart)");
           }
         },
         "Element type, a comma list, or all: u8 i8 i16 i32 i64 f16 bf16 f32 f64, or as "
         "nccl-tests names them: uint8 int8 int32 int64 half bfloat16 float double (hoop has "
         "no uint32 or uint64)")
      ->default_str("f32");
  app.add_option_function<std::string>(
         "-o,--op",
         [&options](const std::string& text) {
           options.ops = parse_list(text, kAllReduceOps, parse_op, "reduction op");
         },
         "Reduction op: sum avg min max prod, a comma list, or all")
      ->default_str("sum");
  app.add_option_function<std::string>(
         "-r,--root",
         [&options](const std::string& text) {
           if (lower(text) == "all") {
             options.root = -1;
             return;
           }
           int root = -1;
           if (!CLI::detail::lexical_cast(text, root) || root < 0)
             throw CLI::ValidationError("--root",
                                        "expected a rank (0, 1, ...) or all, not '" + text + "'");
           options.root = root;
         },
         "Root rank of rooted collectives, or all: each root in turn")
      ->default_str("0");
  app.add_option("--json", options.json_path, "Also write the results as JSON to this file");
  // nccl-tests' layout and launch flags. One process is one rank with one thread here, calls
  // run on the host thread and complete within the call: only the values that say so apply.
  app.add_option("-t,--nthreads", options.nthreads,
                 "Threads per process: 1 (one rank per process; start more ranks instead)")
      ->capture_default_str();
  int parallel_init = 0;
  app.add_option("-p,--parallel_init", parallel_init,
                 "0 or 1: accepted for nccl-tests' command lines; each process already sets "
                 "up its own communicator")
      ->check(CLI::Range(0, 1));
  int blocking = 0;
  app.add_option("-z,--blocking", blocking,
                 "0 or 1: accepted for nccl-tests' command lines; hoop's calls complete before "
                 "they return either way")
      ->check(CLI::Range(0, 1));
  app.add_option("-G,--cudagraph", options.cudagraph,
                 "CUDA graph launches: 0 (hoop's collectives are host calls, not capturable)")
      ->capture_default_str();
}

Status validate(const BenchOptions& options) {
  if (options.min_bytes > options.max_bytes)
    return invalid_argument(fmt::format("--minbytes {} is larger than --maxbytes {}",
                                        options.min_bytes, options.max_bytes));
  if (options.min_bytes < options.max_bytes && options.step_bytes == 0 &&
      !(options.step_factor > 1.0))
    return invalid_argument(
        fmt::format("--stepfactor must be above 1 (got {})", options.step_factor));
  if (options.nthreads != 1)
    return invalid_argument(fmt::format(
        "-t {}: every rank here is one process with one thread; start {} times the ranks "
        "instead (hooprun -np)",
        options.nthreads, options.nthreads));
  if (options.cudagraph != 0)
    return invalid_argument(
        fmt::format("-G {}: hoop's collectives are host calls that a CUDA graph cannot capture; "
                    "leave -G out (or 0)",
                    options.cudagraph));
  return Status::success();
}

std::vector<std::size_t> message_sizes(const BenchOptions& options, std::size_t element_size) {
  std::vector<std::size_t> sizes;
  double size = static_cast<double>(options.min_bytes);
  const auto max_bytes = static_cast<double>(options.max_bytes);
  while (size <= max_bytes) {
    const std::size_t count =
        std::max<std::size_t>(1, static_cast<std::size_t>(size) / element_size);
    const std::size_t bytes = count * element_size;
    if (sizes.empty() || sizes.back() != bytes) sizes.push_back(bytes);
    if (options.step_bytes > 0) {
      size = std::max(size, static_cast<double>(bytes)) + static_cast<double>(options.step_bytes);
      continue;
    }
    if (!(options.step_factor > 1.0)) break;
    // From the size actually measured: a minimum of 0 bytes (one element) must grow too.
    size = std::max(size, static_cast<double>(bytes)) * options.step_factor;
  }
  return sizes;
}

Measurement make_measurement(std::size_t bytes, double time_us, double factor, std::int64_t wrong) {
  Measurement m;
  m.time_us = time_us;
  m.algbw_gbps = time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0.0;
  m.busbw_gbps = m.algbw_gbps * factor;
  m.wrong = wrong;
  return m;
}

Measurement not_measured() {
  Measurement m;
  m.measured = false;
  return m;
}

std::string local_rank_line(int rank) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
  return fmt::format("Rank {:2d} Pid {:6d} on {:>10s}", rank, static_cast<int>(getpid()), host);
}

Report::Report(BenchOptions options, RunInfo info, std::FILE* out)
    : options_(std::move(options)), info_(std::move(info)), out_(out) {}

void Report::print_header() {
  std::string dtypes;
  for (const DataType d : options_.dtypes)
    dtypes += fmt::format("{}{}", dtypes.empty() ? "" : ",", dtype_name(d));
  std::string ops;
  for (const ReduceOp o : options_.ops)
    ops += fmt::format("{}{}", ops.empty() ? "" : ",", op_name(o));
  fmt::print(out_, "# {} ({}): {}\n", info_.program, collective_name(info_.collective),
             info_.implementation);
  const std::string step = options_.step_bytes > 0
                               ? fmt::format("{}(bytes)", options_.step_bytes)
                               : fmt::format("{:g}(factor)", options_.step_factor);
  static constexpr const char* kAverage[] = {"rank 0", "mean", "min", "max"};
  fmt::print(out_,
             "# nRanks {} minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} agg "
             "iters: {} validation: {} datatype: {} redop: {} root: {} time over ranks: {}\n",
             info_.nranks, options_.min_bytes, options_.max_bytes, step, options_.warmup_iters,
             options_.iters, options_.agg_iters, options_.check, dtypes, ops,
             options_.root < 0 ? std::string("all") : std::to_string(options_.root),
             kAverage[static_cast<int>(options_.average)]);
  fmt::print(out_, "#\n# Using ranks\n");
  for (const std::string& line : info_.rank_lines) fmt::print(out_, "#  {}\n", line);
  fmt::print(out_, "#\n");
  fmt::print(out_, "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:^32s}  {:^32s}\n", "", "", "", "",
             "", "out-of-place", "in-place");
  fmt::print(out_,
             "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s}  {:>6s}  {:>7s}  "
             "{:>6s}  {:>6s}  {:>6s}\n",
             "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
             "algbw", "busbw", "#wrong");
  fmt::print(out_,
             "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}  {:>7s}  {:>6s}  {:>6s}  {:>6s}  {:>7s}  "
             "{:>6s}  {:>6s}  {:>6s}\n",
             "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
             "(GB/s)", "");
  std::fflush(out_);
}

void Report::note(const std::string& text) {
  fmt::print(out_, "# {}\n", text);
  std::fflush(out_);
  notes_.push_back(text);
}

void Report::add_row(const Row& row) {
  std::string line =
      fmt::format("{:12d}  {:12d}  {:>8s}  {:>6s}  {:6d}", row.bytes, row.count,
                  dtype_name(row.dtype), row.op ? op_name(*row.op) : "none", row.root);
  for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
    if (!m->measured) {
      line += fmt::format("  {:>7s}  {:>6s}  {:>6s}  {:>6s}", "N/A", "N/A", "N/A", "N/A");
      continue;
    }
    line += fmt::format("  {}  {:6.2f}  {:6.2f}  {:>6s}", format_time(m->time_us), m->algbw_gbps,
                        m->busbw_gbps, format_wrong(m->wrong));
  }
  fmt::print(out_, "{}\n", line);
  std::fflush(out_);
  rows_.push_back(row);
}

Status Report::finish() {
  const std::int64_t wrong = wrong_total();
  fmt::print(out_, "# Out of bounds values : {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED");
  fmt::print(out_, "# Avg bus bandwidth    : {:.6g}\n#\n", avg_busbw_gbps());
  std::fflush(out_);
  if (options_.json_path.empty()) return Status::success();
  std::ofstream file(options_.json_path);
  file << json() << '\n';
  file.close();
  if (!file) return io_error(fmt::format("cannot write the JSON report to {}", options_.json_path));
  return Status::success();
}

double Report::avg_busbw_gbps() const {
  double total = 0;
  std::size_t n = 0;
  for (const Row& row : rows_) {
    for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
      if (!m->measured) continue;
      total += m->busbw_gbps;
      ++n;
    }
  }
  return n == 0 ? 0.0 : total / static_cast<double>(n);
}

std::int64_t Report::wrong_total() const {
  std::int64_t total = 0;
  for (const Row& row : rows_) total += row.wrong();
  return total;
}

std::string Report::json() const {
  nlohmann::json settings{
      {"minbytes", options_.min_bytes},
      {"maxbytes", options_.max_bytes},
      {"stepfactor", options_.step_factor},
      {"stepbytes", options_.step_bytes},
      {"iters", options_.iters},
      {"agg_iters", options_.agg_iters},
      {"average", static_cast<int>(options_.average)},
      {"warmup_iters", options_.warmup_iters},
      {"check", options_.check},
      {"root", options_.root < 0 ? nlohmann::json("all") : nlohmann::json(options_.root)}};
  settings["datatypes"] = nlohmann::json::array();
  for (const DataType d : options_.dtypes) settings["datatypes"].push_back(dtype_name(d));
  settings["ops"] = nlohmann::json::array();
  for (const ReduceOp o : options_.ops) settings["ops"].push_back(op_name(o));
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& row : rows_) {
    rows.push_back({{"size", row.bytes},
                    {"count", row.count},
                    {"type", dtype_name(row.dtype)},
                    {"redop", row.op ? op_name(*row.op) : "none"},
                    {"root", row.root},
                    {"out_of_place", measurement_json(row.out_of_place)},
                    {"in_place", measurement_json(row.in_place)}});
  }
  const nlohmann::json report{{"program", info_.program},
                              {"implementation", info_.implementation},
                              {"collective", collective_name(info_.collective)},
                              {"nranks", info_.nranks},
                              {"settings", settings},
                              {"ranks", info_.rank_lines},
                              {"notes", notes_},
                              {"rows", rows},
                              {"wrong_total", wrong_total()},
                              {"avg_busbw_gbps", avg_busbw_gbps()}};
  return report.dump(2);
}

}  // namespace hoop::bench
