#include "bench/common/collective_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "bench/common/bench_data.h"
#include "bench/common/collective_variants.h"

namespace hoop::bench {
namespace {

// The table's count of each nccl-tests size: whole elements per block, at least one, without
// repeating a count that rounding made equal to the previous one.
std::vector<std::size_t> case_counts(const BenchOptions& options, BenchCollective collective,
                                     DataType dtype, int nranks) {
  const std::size_t esize = dtype_size(dtype);
  const auto blocks = static_cast<std::size_t>(blocks_per_size(collective, nranks));
  std::vector<std::size_t> counts;
  for (const std::size_t bytes : message_sizes(options, esize)) {
    const std::size_t count = std::max<std::size_t>(1, bytes / esize / blocks);
    if (counts.empty() || counts.back() != count) counts.push_back(count);
  }
  return counts;
}

std::size_t case_bytes(BenchCollective collective, DataType dtype, std::size_t count, int nranks) {
  return count * static_cast<std::size_t>(blocks_per_size(collective, nranks)) * dtype_size(dtype);
}

Result<double> time_variant(CollectivePeer& peer, const BenchOptions& options, const Variant& v) {
  return time_calls(peer, options, [&] { return peer.run(v.call); });
}

// Writes fresh inputs into the host copies and copies both buffers' first `bytes` to the target.
Status prepare_variant(const Variant& v, Buffers b, std::size_t bytes) {
  v.prepare();
  HOOP_RETURN_IF_ERROR(b.send->push(bytes));
  return b.recv->push(bytes);
}

// Wrong elements over all ranks after one call on fresh inputs (the timed iterations keep
// working on their own output, as in nccl-tests, so they cannot be checked).
Result<std::int64_t> check_variant(CollectivePeer& peer, const Variant& v, Buffers b,
                                   std::size_t bytes) {
  HOOP_RETURN_IF_ERROR(prepare_variant(v, b, bytes));
  HOOP_RETURN_IF_ERROR(peer.run(v.call));
  HOOP_RETURN_IF_ERROR(b.send->pull(bytes));
  HOOP_RETURN_IF_ERROR(b.recv->pull(bytes));
  return peer.sum_over_ranks(v.wrong());
}

// Times one variant and, when `check`, counts its wrong elements.
Result<Measurement> measure_variant(CollectivePeer& peer, const BenchOptions& options, Buffers b,
                                    const Case& c, const Variant& v, bool check) {
  HOOP_RETURN_IF_ERROR(prepare_variant(v, b, c.bytes));
  HOOP_ASSIGN_OR_RETURN(const double us, time_variant(peer, options, v));
  std::int64_t wrong = -1;
  if (check) {
    HOOP_ASSIGN_OR_RETURN(
        wrong, checked_calls(options, [&] { return check_variant(peer, v, b, c.bytes); }));
  }
  return make_measurement(c.bytes, us, bus_factor(c.collective, peer.size()), wrong);
}

Result<Row> measure(CollectivePeer& peer, const BenchOptions& options, Buffers b, const Case& c,
                    bool check) {
  Row row;
  row.bytes = c.bytes;
  row.count = c.count;
  row.dtype = c.dtype;
  row.op = c.op;
  row.root = is_rooted(c.collective) ? c.root : -1;
  for (const bool in_place : {false, true}) {
    const std::optional<Variant> v = make_variant(c, peer.rank(), peer.size(), b, in_place);
    Measurement m = not_measured();
    if (v) {
      HOOP_ASSIGN_OR_RETURN(m, measure_variant(peer, options, b, c, *v, check));
    }
    (in_place ? row.in_place : row.out_of_place) = m;
  }
  return row;
}

Status validate_for(const BenchOptions& options, BenchCollective collective, int nranks) {
  HOOP_RETURN_IF_ERROR(validate(options));
  if (is_rooted(collective) && options.root >= nranks)
    return invalid_argument(
        fmt::format("--root {} is not a rank of this {}-rank job", options.root, nranks));
  if (collective == BenchCollective::kSendrecv && nranks < 2)
    return invalid_argument("sendrecv sends to the next rank, so it needs 2 ranks or more");
  return Status::success();
}

}  // namespace

Result<std::int64_t> run_collective_bench(const BenchOptions& options, CollectivePeer& peer,
                                          BenchCollective collective, const std::string& program,
                                          std::FILE* out) {
  if (collective == BenchCollective::kAllreduce)
    return run_allreduce_bench(options, peer, program, out);
  HOOP_RETURN_IF_ERROR(validate_for(options, collective, peer.size()));
  HOOP_ASSIGN_OR_RETURN(std::vector<std::string> lines,
                        peer.gather_lines(local_rank_line(peer.rank())));

  // Only the reducing collectives have an op; the others run once per dtype and print "none".
  std::vector<std::optional<ReduceOp>> ops;
  if (reduces(collective)) {
    for (const ReduceOp op : options.ops) ops.emplace_back(op);
  } else {
    ops.emplace_back(std::nullopt);
  }

  // -r all: each rank is the root in turn, one row per root (rootless collectives: one row).
  std::vector<int> roots;
  if (is_rooted(collective) && options.root < 0) {
    for (int r = 0; r < peer.size(); ++r) roots.push_back(r);
  } else {
    roots.push_back(options.root < 0 ? 0 : options.root);
  }

  std::size_t largest = 0;
  for (const DataType dtype : options.dtypes) {
    const std::size_t count = case_counts(options, collective, dtype, peer.size()).back();
    largest = std::max(largest, case_bytes(collective, dtype, count, peer.size()));
  }

  std::optional<Report> report;
  if (peer.rank() == 0) {
    report.emplace(options,
                   RunInfo{program, peer.describe_collective(collective), collective, peer.size(),
                           std::move(lines)},
                   out);
    report->print_header();
  }
  const auto note = [&report](const std::string& text) {
    if (report) report->note(text);
  };
  if (collective == BenchCollective::kBroadcast)
    note(
        "out-of-place: the root broadcasts from its send buffer into the others' receive "
        "buffers");
  if (collective == BenchCollective::kSendrecv)
    note(
        "in-place: N/A (a send and a receive on one buffer would overwrite what is still to "
        "be sent)");

  HOOP_ASSIGN_OR_RETURN(const std::unique_ptr<BenchBuffer> send, peer.allocate(largest));
  HOOP_ASSIGN_OR_RETURN(const std::unique_ptr<BenchBuffer> recv, peer.allocate(largest));
  const Buffers buffers{send.get(), recv.get()};

  std::int64_t wrong = 0;
  for (const DataType dtype : options.dtypes) {
    for (const std::optional<ReduceOp> op : ops) {
      // Every rank decides alike (supports and check_exact are pure), so no rank waits in a
      // skipped case.
      bool check = options.check != 0;
      if (op) {
        if (const Status s = peer.supports(dtype, *op); !s.ok()) {
          note(fmt::format("skipped: {}", s.message()));
          continue;
        }
        if (const Status s = check_exact(dtype, *op, peer.size()); check && !s.ok()) {
          note(fmt::format("#wrong not checked: {}", s.message()));
          check = false;
        }
      }
      for (const std::size_t count : case_counts(options, collective, dtype, peer.size())) {
        for (const int root : roots) {
          const Case c{
              collective, dtype, op, count, case_bytes(collective, dtype, count, peer.size()),
              root};
          HOOP_ASSIGN_OR_RETURN(const Row row, measure(peer, options, buffers, c, check));
          wrong += row.wrong();
          if (report) report->add_row(row);
        }
      }
    }
  }
  if (report) HOOP_RETURN_IF_ERROR(report->finish());
  return wrong;
}

}  // namespace hoop::bench
