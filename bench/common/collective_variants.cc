#include "bench/common/collective_variants.h"

#include "bench/common/bench_data.h"

namespace hoop::bench {
namespace {

std::size_t block_bytes(const Case& c) { return c.count * dtype_size(c.dtype); }

CollectiveCall call_of(const Case& c, std::byte* input, std::byte* output, bool in_place) {
  return {.collective = c.collective,
          .input = input,
          .output = output,
          .count = c.count,
          .dtype = c.dtype,
          .op = c.op.value_or(ReduceOp::kSum),
          .root = c.root,
          .in_place = in_place};
}

// The root's data is block `root`, so a broadcast from the wrong rank is counted. Out of place,
// the root sends from its send buffer and the others receive into their receive buffer.
Variant broadcast_variant(const Case& c, int rank, Buffers b, bool in_place) {
  const bool is_root = rank == c.root;
  BenchBuffer* mine = in_place || !is_root ? b.recv : b.send;
  std::byte* data = mine->host();
  const auto block = static_cast<std::uint64_t>(c.root);
  Variant v;
  v.prepare = [=] {
    poison(b.recv->host(), c.count, c.dtype);
    if (is_root) fill_block(data, c.count, c.dtype, block);
  };
  v.call = call_of(c, (in_place ? b.recv : b.send)->target(), b.recv->target(), in_place);
  v.wrong = [=] { return count_block_wrong(data, c.count, c.dtype, block); };
  return v;
}

// Reduce, and allreduce (a reduce whose result every rank checks). In place, one buffer holds
// the input and then the result.
Variant reduce_variant(const Case& c, int rank, int nranks, Buffers b, bool in_place) {
  const ReduceOp op = *c.op;
  BenchBuffer* input = in_place ? b.recv : b.send;
  std::byte* output = b.recv->host();
  const bool checks = rank == c.root || c.collective == BenchCollective::kAllreduce;
  Variant v;
  v.prepare = [=] {
    if (!in_place) poison(output, c.count, c.dtype);
    fill_allreduce_input(input->host(), c.count, c.dtype, op, rank, nranks);
  };
  v.call = call_of(c, input->target(), b.recv->target(), in_place);
  v.wrong = [=]() -> std::int64_t {
    return checks ? count_allreduce_wrong(output, c.count, c.dtype, op, nranks) : 0;
  };
  return v;
}

// Gather, and allgather (a gather whose result every rank checks): rank r's input is block r.
Variant gather_variant(const Case& c, int rank, int nranks, Buffers b, bool in_place) {
  const std::size_t bytes = block_bytes(c);
  std::byte* output = b.recv->host();
  std::byte* input = in_place ? output + bytes * static_cast<std::size_t>(rank) : b.send->host();
  const bool checks = rank == c.root || c.collective == BenchCollective::kAllgather;
  Variant v;
  v.prepare = [=] {
    poison(output, c.count * static_cast<std::size_t>(nranks), c.dtype);
    fill_block(input, c.count, c.dtype, static_cast<std::uint64_t>(rank));
  };
  v.call = call_of(c, in_place ? b.recv->target_of(input) : b.send->target(), b.recv->target(),
                   in_place);
  v.wrong = [=] {
    std::int64_t wrong = 0;
    for (int r = 0; checks && r < nranks; ++r)
      wrong += count_block_wrong(output + bytes * static_cast<std::size_t>(r), c.count, c.dtype,
                                 static_cast<std::uint64_t>(r));
    return wrong;
  };
  return v;
}

// Block r of the root's input is block r, so a block sent to the wrong rank is counted. In
// place, each rank's output is its block of the send buffer.
Variant scatter_variant(const Case& c, int rank, int nranks, Buffers b, bool in_place) {
  const std::size_t bytes = block_bytes(c);
  const bool is_root = rank == c.root;
  std::byte* input = b.send->host();
  BenchBuffer* out_buffer = in_place ? b.send : b.recv;
  std::byte* output = in_place ? input + bytes * static_cast<std::size_t>(rank) : b.recv->host();
  Variant v;
  v.prepare = [=] {
    if (!(in_place && is_root)) poison(output, c.count, c.dtype);  // the root's is its input
    for (int j = 0; is_root && j < nranks; ++j)
      fill_block(input + bytes * static_cast<std::size_t>(j), c.count, c.dtype,
                 static_cast<std::uint64_t>(j));
  };
  v.call = call_of(c, b.send->target(), out_buffer->target_of(output), in_place);
  v.wrong = [=] {
    return count_block_wrong(output, c.count, c.dtype, static_cast<std::uint64_t>(rank));
  };
  return v;
}

// In place, hoop's reduce_scatter reads all blocks from the output buffer and leaves this
// rank's reduced block at its start (MPI_Reduce_scatter_block with MPI_IN_PLACE does the same).
Variant reduce_scatter_variant(const Case& c, int rank, int nranks, Buffers b, bool in_place) {
  const ReduceOp op = *c.op;
  const auto n = static_cast<std::size_t>(nranks);
  std::byte* output = in_place ? b.send->host() : b.recv->host();
  Variant v;
  v.prepare = [=] {
    fill_allreduce_input(b.send->host(), c.count * n, c.dtype, op, rank, nranks);
    if (!in_place) poison(output, c.count, c.dtype);
  };
  v.call = call_of(c, b.send->target(), (in_place ? b.send : b.recv)->target(), in_place);
  v.wrong = [=] {
    return count_allreduce_wrong(output, c.count, c.dtype, op, nranks,
                                 c.count * static_cast<std::size_t>(rank));
  };
  return v;
}

// Block j of rank i's input is block (i, j), numbered i * n + j; it must arrive as block i of
// rank j's output. In place, one buffer holds the input and then the output.
Variant alltoall_variant(const Case& c, int rank, int nranks, Buffers b, bool in_place) {
  const auto n = static_cast<std::size_t>(nranks);
  const auto me = static_cast<std::uint64_t>(rank);
  const std::size_t bytes = block_bytes(c);
  std::byte* output = b.recv->host();
  BenchBuffer* input = in_place ? b.recv : b.send;
  Variant v;
  v.prepare = [=] {
    if (!in_place) poison(output, c.count * n, c.dtype);
    for (std::size_t j = 0; j < n; ++j)
      fill_block(input->host() + bytes * j, c.count, c.dtype, me * n + j);
  };
  v.call = call_of(c, input->target(), b.recv->target(), in_place);
  v.wrong = [=] {
    std::int64_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += count_block_wrong(output + bytes * i, c.count, c.dtype, i * n + me);
    return wrong;
  };
  return v;
}

// Rank r sends block r to rank r + 1, so a message from the wrong rank is counted.
Variant sendrecv_variant(const Case& c, int rank, int nranks, Buffers b) {
  const auto from = static_cast<std::uint64_t>((rank + nranks - 1) % nranks);
  Variant v;
  v.prepare = [=] {
    poison(b.recv->host(), c.count, c.dtype);
    fill_block(b.send->host(), c.count, c.dtype, static_cast<std::uint64_t>(rank));
  };
  v.call = call_of(c, b.send->target(), b.recv->target(), /*in_place=*/false);
  v.wrong = [=] { return count_block_wrong(b.recv->host(), c.count, c.dtype, from); };
  return v;
}

}  // namespace

std::optional<Variant> make_variant(const Case& c, int rank, int nranks, Buffers b, bool in_place) {
  switch (c.collective) {
    case BenchCollective::kBroadcast:
      return broadcast_variant(c, rank, b, in_place);
    case BenchCollective::kAllreduce:
    case BenchCollective::kReduce:
      return reduce_variant(c, rank, nranks, b, in_place);
    case BenchCollective::kAllgather:
    case BenchCollective::kGather:
      return gather_variant(c, rank, nranks, b, in_place);
    case BenchCollective::kScatter:
      return scatter_variant(c, rank, nranks, b, in_place);
    case BenchCollective::kReduceScatter:
      return reduce_scatter_variant(c, rank, nranks, b, in_place);
    case BenchCollective::kAlltoall:
      return alltoall_variant(c, rank, nranks, b, in_place);
    case BenchCollective::kSendrecv:
      if (in_place) return std::nullopt;
      return sendrecv_variant(c, rank, nranks, b);
  }
  return std::nullopt;
}

}  // namespace hoop::bench
