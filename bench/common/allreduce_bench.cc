#include "bench/common/allreduce_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>

#include "bench/common/bench_data.h"

namespace hoop::bench {
namespace {

struct AllreduceCase {
  DataType dtype;
  ReduceOp op;
  std::size_t count;
};

Result<double> time_variant(AllreducePeer& peer, const BenchOptions& options, const void* send,
                            void* recv, const AllreduceCase& c) {
  return time_calls(peer, options,
                    [&] { return peer.allreduce(send, recv, c.count, c.dtype, c.op); });
}

// Wrong elements over all ranks after one allreduce of fresh inputs.
Result<std::int64_t> check_variant(AllreducePeer& peer, BenchBuffer& send, BenchBuffer& recv,
                                   bool in_place, const AllreduceCase& c) {
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  if (in_place) {
    fill_allreduce_input(recv.host(), c.count, c.dtype, c.op, peer.rank(), peer.size());
  } else {
    fill_allreduce_input(send.host(), c.count, c.dtype, c.op, peer.rank(), peer.size());
    poison(recv.host(), c.count, c.dtype);
    HOOP_RETURN_IF_ERROR(send.push(bytes));
  }
  HOOP_RETURN_IF_ERROR(recv.push(bytes));
  HOOP_RETURN_IF_ERROR(peer.allreduce(in_place ? recv.target() : send.target(), recv.target(),
                                      c.count, c.dtype, c.op));
  HOOP_RETURN_IF_ERROR(recv.pull(bytes));
  return peer.sum_over_ranks(
      count_allreduce_wrong(recv.host(), c.count, c.dtype, c.op, peer.size()));
}

Result<Row> measure(AllreducePeer& peer, const BenchOptions& options, BenchBuffer& send,
                    BenchBuffer& recv, const AllreduceCase& c, bool check) {
  const std::size_t bytes = c.count * dtype_size(c.dtype);
  fill_allreduce_input(send.host(), c.count, c.dtype, c.op, peer.rank(), peer.size());
  fill_allreduce_input(recv.host(), c.count, c.dtype, c.op, peer.rank(), peer.size());
  HOOP_RETURN_IF_ERROR(send.push(bytes));
  HOOP_RETURN_IF_ERROR(recv.push(bytes));
  HOOP_ASSIGN_OR_RETURN(const double oop_us,
                        time_variant(peer, options, send.target(), recv.target(), c));
  HOOP_ASSIGN_OR_RETURN(const double ip_us,
                        time_variant(peer, options, recv.target(), recv.target(), c));
  std::int64_t oop_wrong = -1;
  std::int64_t ip_wrong = -1;
  if (check) {
    HOOP_ASSIGN_OR_RETURN(oop_wrong, checked_calls(options, [&] {
                            return check_variant(peer, send, recv, /*in_place=*/false, c);
                          }));
    HOOP_ASSIGN_OR_RETURN(ip_wrong, checked_calls(options, [&] {
                            return check_variant(peer, send, recv, /*in_place=*/true, c);
                          }));
  }
  Row row;
  row.bytes = c.count * dtype_size(c.dtype);
  row.count = c.count;
  row.dtype = c.dtype;
  row.op = c.op;
  row.root = -1;
  const double factor = bus_factor(BenchCollective::kAllreduce, peer.size());
  row.out_of_place = make_measurement(row.bytes, oop_us, factor, oop_wrong);
  row.in_place = make_measurement(row.bytes, ip_us, factor, ip_wrong);
  return row;
}

}  // namespace

Result<double> time_calls(AllreducePeer& peer, const BenchOptions& options,
                          const std::function<Status()>& call) {
  for (int i = 0; i < options.warmup_iters; ++i) HOOP_RETURN_IF_ERROR(call());
  HOOP_RETURN_IF_ERROR(peer.barrier());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < options.iters; ++i)
    for (int k = 0; k < options.agg_iters; ++k) HOOP_RETURN_IF_ERROR(call());
  const std::chrono::duration<double, std::micro> elapsed =
      std::chrono::steady_clock::now() - start;
  const double mine = elapsed.count() / options.iters / options.agg_iters;
  switch (options.average) {
    case Average::kRank0:
      return peer.max_over_ranks(peer.rank() == 0 ? mine : std::numeric_limits<double>::lowest());
    case Average::kMean: {
      // In nanoseconds, through the integer sum every peer has.
      HOOP_ASSIGN_OR_RETURN(const std::int64_t ns, peer.sum_over_ranks(std::llround(mine * 1e3)));
      return static_cast<double>(ns) / 1e3 / peer.size();
    }
    case Average::kMin: {
      HOOP_ASSIGN_OR_RETURN(const double negated, peer.max_over_ranks(-mine));
      return -negated;
    }
    case Average::kMax:
      break;
  }
  return peer.max_over_ranks(mine);
}

Result<std::int64_t> checked_calls(const BenchOptions& options,
                                   const std::function<Result<std::int64_t>()>& check) {
  std::int64_t wrong = 0;
  for (int i = 0; i < std::max(options.check, 1); ++i) {
    HOOP_ASSIGN_OR_RETURN(const std::int64_t w, check());
    wrong += w;
  }
  return wrong;
}

Result<std::int64_t> run_allreduce_bench(const BenchOptions& options, AllreducePeer& peer,
                                         const std::string& program, std::FILE* out) {
  HOOP_RETURN_IF_ERROR(validate(options));
  HOOP_ASSIGN_OR_RETURN(std::vector<std::string> lines,
                        peer.gather_lines(local_rank_line(peer.rank())));

  // Every rank decides alike (supports() and check_exact() are pure), so skipping a case never
  // leaves one rank waiting in a collective the others did not enter.
  std::string unsupported;
  bool any_supported = false;
  std::size_t largest = 0;
  for (const DataType dtype : options.dtypes) {
    for (const ReduceOp op : options.ops) {
      const Status s = peer.supports(dtype, op);
      if (s.ok()) {
        any_supported = true;
        largest = std::max(largest, message_sizes(options, dtype_size(dtype)).back());
      } else {
        unsupported += fmt::format("{}{}", unsupported.empty() ? "" : "; ", s.message());
      }
    }
  }
  if (!any_supported)
    return invalid_argument(fmt::format("{}: nothing to run: {}", program, unsupported));

  std::optional<Report> report;
  if (peer.rank() == 0) {
    report.emplace(options,
                   RunInfo{program, peer.description(), BenchCollective::kAllreduce, peer.size(),
                           std::move(lines)},
                   out);
    report->print_header();
  }
  const auto note = [&report](const std::string& text) {
    if (report) report->note(text);
  };

  HOOP_ASSIGN_OR_RETURN(const std::unique_ptr<BenchBuffer> send, peer.allocate(largest));
  HOOP_ASSIGN_OR_RETURN(const std::unique_ptr<BenchBuffer> recv, peer.allocate(largest));

  std::int64_t wrong = 0;
  for (const DataType dtype : options.dtypes) {
    for (const ReduceOp op : options.ops) {
      if (const Status s = peer.supports(dtype, op); !s.ok()) {
        note(fmt::format("skipped: {}", s.message()));
        continue;
      }
      bool check = options.check != 0;
      if (const Status s = check_exact(dtype, op, peer.size()); check && !s.ok()) {
        note(fmt::format("#wrong not checked: {}", s.message()));
        check = false;
      }
      for (const std::size_t bytes : message_sizes(options, dtype_size(dtype))) {
        const AllreduceCase c{dtype, op, bytes / dtype_size(dtype)};
        HOOP_ASSIGN_OR_RETURN(const Row row, measure(peer, options, *send, *recv, c, check));
        wrong += row.wrong();
        if (report) report->add_row(row);
      }
    }
  }
  if (report) HOOP_RETURN_IF_ERROR(report->finish());
  return wrong;
}

}  // namespace hoop::bench
