#include "bench/hoop_bench_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "bench/common/bench_data.h"

namespace hoop::bench {
namespace {

// One table row to measure. `count` is what nccl-tests prints: the per-rank block for
// allgather, reduce_scatter and alltoall, the whole buffer for broadcast; `bytes` is the
// largest buffer a rank touches, which algbw divides by.
struct Case {
  Collective collective;
  DataType dtype;
  std::optional<ReduceOp> op;
  std::size_t count;
  std::size_t bytes;
};

// One variant (out-of-place or in-place) of a case: `prepare` writes fresh inputs and poisons
// the output in host memory, `call` runs the collective once on the target buffers, `wrong`
// counts this rank's wrong elements in host memory after prepare + call; measure() copies
// between the two around them.
struct Variant {
  std::function<void()> prepare;
  std::function<Status()> call;
  std::function<std::int64_t()> wrong;
};

// The variants fill and check the host copies `send` and `recv`, and give the collective the
// same addresses in the target buffers (BenchBuffer::target_of).
struct Buffers {
  BenchBuffer* send_buffer;
  BenchBuffer* recv_buffer;
  std::byte* send;
  std::byte* recv;
};

// Per-rank element count of each nccl-tests size: blocks of whole elements on every rank, at
// least one, without repeating a size that rounding made equal to the previous one.
std::vector<std::size_t> block_counts(const BenchOptions& options, Collective collective,
                                      DataType dtype, int nranks) {
  const std::size_t esize = dtype_size(dtype);
  const std::size_t blocks = collective == Collective::kBroadcast ? 1 : nranks;
  std::vector<std::size_t> counts;
  for (const std::size_t bytes : message_sizes(options, esize)) {
    const std::size_t count = std::max<std::size_t>(1, bytes / esize / blocks);
    if (counts.empty() || counts.back() != count) counts.push_back(count);
  }
  return counts;
}

std::size_t case_bytes(Collective collective, DataType dtype, std::size_t count, int nranks) {
  const std::size_t blocks = collective == Collective::kBroadcast ? 1 : nranks;
  return count * blocks * dtype_size(dtype);
}

// hoop's broadcast has one buffer, so "out-of-place" means the root broadcasts from its send
// buffer while the other ranks receive into their receive buffer; in-place uses one buffer on
// every rank.
Variant broadcast_variant(Communicator& comm, const Case& c, int root, Buffers b, bool in_place) {
  const bool is_root = comm.rank() == root;
  BenchBuffer* buffer_of = in_place || !is_root ? b.recv_buffer : b.send_buffer;
  std::byte* buffer = buffer_of->host();
  Variant v;
  v.prepare = [=] {
    poison(b.recv, c.count, c.dtype);
    if (is_root) fill_block(buffer, c.count, c.dtype, static_cast<std::uint64_t>(root));
  };
  v.call = [=, &comm] {
    return broadcast(comm, BroadcastOptions{buffer_of->target(), c.count, c.dtype, root});
  };
  v.wrong = [=] {
    return count_block_wrong(buffer, c.count, c.dtype, static_cast<std::uint64_t>(root));
  };
  return v;
}

Variant allgather_variant(Communicator& comm, const Case& c, Buffers b, bool in_place) {
  const int n = comm.size();
  const std::size_t block_bytes = c.count * dtype_size(c.dtype);
  std::byte* own = b.recv + block_bytes * static_cast<std::size_t>(comm.rank());
  const std::byte* input = in_place ? own : b.send;
  const std::byte* target_input =
      in_place ? b.recv_buffer->target_of(own) : b.send_buffer->target();
  Variant v;
  v.prepare = [=, &comm] {
    poison(b.recv, c.count * n, c.dtype);
    fill_block(const_cast<std::byte*>(input), c.count, c.dtype,
               static_cast<std::uint64_t>(comm.rank()));
  };
  v.call = [=, &comm] {
    return allgather(comm,
                     AllgatherOptions{target_input, b.recv_buffer->target(), c.count, c.dtype});
  };
  v.wrong = [=] {
    std::int64_t wrong = 0;
    for (int r = 0; r < n; ++r)
      wrong += count_block_wrong(b.recv + block_bytes * r, c.count, c.dtype,
                                 static_cast<std::uint64_t>(r));
    return wrong;
  };
  return v;
}

// In place, hoop's reduce_scatter reads all size() blocks from the output buffer and leaves
// this rank's reduced block at its start.
Variant reduce_scatter_variant(Communicator& comm, const Case& c, Buffers b, bool in_place) {
  const int n = comm.size();
  const ReduceOp op = *c.op;
  std::byte* output = in_place ? b.send : b.recv;
  std::byte* target_output = in_place ? b.send_buffer->target() : b.recv_buffer->target();
  Variant v;
  v.prepare = [=, &comm] {
    fill_allreduce_input(b.send, c.count * n, c.dtype, op, comm.rank(), n);
    if (!in_place) poison(b.recv, c.count, c.dtype);
  };
  v.call = [=, &comm] {
    return reduce_scatter(
        comm, ReduceScatterOptions{b.send_buffer->target(), target_output, c.count, c.dtype, op});
  };
  v.wrong = [=, &comm] {
    return count_allreduce_wrong(output, c.count, c.dtype, op, n,
                                 c.count * static_cast<std::size_t>(comm.rank()));
  };
  return v;
}

// Block j of rank i's input is block (i, j), numbered i * n + j; it must arrive as block i of
// rank j's output.
Variant alltoall_variant(Communicator& comm, const Case& c, Buffers b, bool in_place) {
  const int n = comm.size();
  const auto rank = static_cast<std::uint64_t>(comm.rank());
  const std::size_t block_bytes = c.count * dtype_size(c.dtype);
  std::byte* output = b.recv;
  const std::byte* input = in_place ? b.recv : b.send;
  const std::byte* target_input = in_place ? b.recv_buffer->target() : b.send_buffer->target();
  Variant v;
  v.prepare = [=] {
    if (!in_place) poison(b.recv, c.count * n, c.dtype);
    for (int j = 0; j < n; ++j)
      fill_block(const_cast<std::byte*>(input) + block_bytes * j, c.count, c.dtype, rank * n + j);
  };
  v.call = [=, &comm] {
    return alltoall(comm, AlltoallOptions{target_input, b.recv_buffer->target(), c.count, c.dtype});
  };
  v.wrong = [=] {
    std::int64_t wrong = 0;
    for (int i = 0; i < n; ++i)
      wrong += count_block_wrong(output + block_bytes * i, c.count, c.dtype,
                                 static_cast<std::uint64_t>(i) * n + rank);
    return wrong;
  };
  return v;
}

Variant make_variant(Communicator& comm, const Case& c, int root, Buffers b, bool in_place) {
  switch (c.collective) {
    case Collective::kBroadcast:
      return broadcast_variant(comm, c, root, b, in_place);
    case Collective::kAllgather:
      return allgather_variant(comm, c, b, in_place);
    case Collective::kReduceScatter:
      return reduce_scatter_variant(comm, c, b, in_place);
    case Collective::kAlltoall:
    // Excluded by run_collective_bench (allreduce) or never parsed from -collective (the rest).
    case Collective::kAllreduce:
    case Collective::kAllgatherv:
    case Collective::kAlltoallv:
    case Collective::kBarrier:
    case Collective::kReduce:
    case Collective::kGather:
    case Collective::kGatherv:
    case Collective::kScatter:
    case Collective::kScatterv:
    case Collective::kReduceScatterv:
      break;
  }
  return alltoall_variant(comm, c, b, in_place);
}

// Slowest rank's mean time per iteration in microseconds.
Result<double> time_variant(HoopPeer& peer, const BenchOptions& options, const Variant& v) {
  for (int i = 0; i < options.warmup_iters; ++i) HOOP_RETURN_IF_ERROR(v.call());
  HOOP_RETURN_IF_ERROR(peer.barrier());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < options.iters; ++i) HOOP_RETURN_IF_ERROR(v.call());
  const std::chrono::duration<double, std::micro> elapsed =
      std::chrono::steady_clock::now() - start;
  return peer.max_over_ranks(elapsed.count() / options.iters);
}

// Writes fresh inputs into the host copies and copies both buffers' first `bytes` to the target.
Status prepare_variant(const Variant& v, Buffers b, std::size_t bytes) {
  v.prepare();
  HOOP_RETURN_IF_ERROR(b.send_buffer->push(bytes));
  return b.recv_buffer->push(bytes);
}

// Wrong elements over all ranks after one call on fresh inputs (the timed iterations keep
// working on their own output, as in nccl-tests, so they cannot be checked).
Result<std::int64_t> check_variant(HoopPeer& peer, const Variant& v, Buffers b, std::size_t bytes) {
  HOOP_RETURN_IF_ERROR(prepare_variant(v, b, bytes));
  HOOP_RETURN_IF_ERROR(v.call());
  HOOP_RETURN_IF_ERROR(b.send_buffer->pull(bytes));
  HOOP_RETURN_IF_ERROR(b.recv_buffer->pull(bytes));
  return peer.sum_over_ranks(v.wrong());
}

Result<Row> measure(HoopPeer& peer, const BenchOptions& options, Buffers b, const Case& c,
                    bool check) {
  const Variant oop = make_variant(peer.comm(), c, options.root, b, /*in_place=*/false);
  const Variant ip = make_variant(peer.comm(), c, options.root, b, /*in_place=*/true);
  HOOP_RETURN_IF_ERROR(prepare_variant(oop, b, c.bytes));
  HOOP_ASSIGN_OR_RETURN(const double oop_us, time_variant(peer, options, oop));
  HOOP_RETURN_IF_ERROR(prepare_variant(ip, b, c.bytes));
  HOOP_ASSIGN_OR_RETURN(const double ip_us, time_variant(peer, options, ip));
  std::int64_t oop_wrong = -1;
  std::int64_t ip_wrong = -1;
  if (check) {
    HOOP_ASSIGN_OR_RETURN(oop_wrong, check_variant(peer, oop, b, c.bytes));
    HOOP_ASSIGN_OR_RETURN(ip_wrong, check_variant(peer, ip, b, c.bytes));
  }
  Row row;
  row.bytes = c.bytes;
  row.count = c.count;
  row.dtype = c.dtype;
  row.op = c.op;
  row.root = c.collective == Collective::kBroadcast ? options.root : -1;
  const double factor = bus_factor(c.collective, peer.size());
  row.out_of_place = make_measurement(row.bytes, oop_us, factor, oop_wrong);
  row.in_place = make_measurement(row.bytes, ip_us, factor, ip_wrong);
  return row;
}

}  // namespace

Result<std::int64_t> run_collective_bench(const BenchOptions& options, HoopPeer& peer,
                                          Collective collective, const std::string& program,
                                          std::FILE* out) {
  if (collective == Collective::kAllreduce)
    return invalid_argument("run_collective_bench: allreduce runs through run_allreduce_bench");
  HOOP_RETURN_IF_ERROR(validate(options));
  if (collective == Collective::kBroadcast && options.root >= peer.size())
    return invalid_argument(
        fmt::format("--root {} is not a rank of this {}-rank job", options.root, peer.size()));
  HOOP_ASSIGN_OR_RETURN(std::vector<std::string> lines,
                        peer.gather_lines(local_rank_line(peer.rank())));

  const bool reduces = collective == Collective::kReduceScatter;
  // Only reduce_scatter has an op; the others run once per dtype and print "none".
  std::vector<std::optional<ReduceOp>> ops;
  if (reduces) {
    for (const ReduceOp op : options.ops) ops.emplace_back(op);
  } else {
    ops.emplace_back(std::nullopt);
  }

  std::size_t largest = 0;
  for (const DataType dtype : options.dtypes) {
    const std::size_t count = block_counts(options, collective, dtype, peer.size()).back();
    largest = std::max(largest, case_bytes(collective, dtype, count, peer.size()));
  }

  std::optional<Report> report;
  if (peer.rank() == 0) {
    report.emplace(options,
                   RunInfo{program, peer.describe(std::string(collective_name(collective))),
                           collective, peer.size(), std::move(lines)},
                   out);
    report->print_header();
    if (collective == Collective::kBroadcast)
      report->note(
          "out-of-place: the root broadcasts from its send buffer into the others' receive "
          "buffers (hoop's broadcast takes one buffer)");
  }

  HOOP_ASSIGN_OR_RETURN(const std::unique_ptr<BenchBuffer> send, peer.allocate(largest));
  HOOP_ASSIGN_OR_RETURN(const std::unique_ptr<BenchBuffer> recv, peer.allocate(largest));
  const Buffers buffers{send.get(), recv.get(), send->host(), recv->host()};

  std::int64_t wrong = 0;
  for (const DataType dtype : options.dtypes) {
    for (const std::optional<ReduceOp> op : ops) {
      // Every rank decides alike (check_exact is pure), so no rank waits in a skipped case.
      bool check = options.check != 0;
      if (op) {
        if (const Status s = check_exact(dtype, *op, peer.size()); check && !s.ok()) {
          if (report) report->note(fmt::format("#wrong not checked: {}", s.message()));
          check = false;
        }
      }
      for (const std::size_t count : block_counts(options, collective, dtype, peer.size())) {
        const Case c{collective, dtype, op, count,
                     case_bytes(collective, dtype, count, peer.size())};
        HOOP_ASSIGN_OR_RETURN(const Row row, measure(peer, options, buffers, c, check));
        wrong += row.wrong();
        if (report) report->add_row(row);
      }
    }
  }
  if (report) HOOP_RETURN_IF_ERROR(report->finish());
  return wrong;
}

}  // namespace hoop::bench
