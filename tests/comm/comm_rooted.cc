#include "tests/comm/comm_rooted.h"

#include <fmt/format.h>

#include "tests/fuzz/fuzz_case.h"
#include "tests/fuzz/fuzz_data.h"
#include "tests/fuzz/fuzz_runner.h"

namespace hoop::comm_check {

Result<std::uint64_t> check_rooted(Communicator& comm, const std::vector<std::size_t>& counts,
                                   const std::vector<DataType>& dtypes,
                                   const std::vector<ReduceOp>& ops,
                                   std::vector<std::string>& problems) {
  constexpr fuzz::Placement kPlacements[] = {fuzz::Placement::kSeparate, fuzz::Placement::kAliased,
                                             fuzz::Placement::kNullInput};
  const int n = comm.size();
  fuzz::CaseRunner runner(comm);
  std::uint64_t index = 0;
  auto run = [&](fuzz::Case c) -> Status {
    c.seed = 31;
    c.index = index;
    c.data_key = 0x2545f4914f6cdd1dull * (++index);
    c.input_offset = static_cast<int>(index % 7);
    c.output_offset = static_cast<int>(index % 5);
    std::vector<std::string> found;
    HOOP_RETURN_IF_ERROR(runner.run(c, found));
    for (const std::string& f : found)
      problems.push_back(fmt::format("rank {}: {}: {}", comm.rank(), fuzz::describe(c), f));
    return Status::success();
  };
  for (std::size_t count : counts) {
    for (DataType dt : dtypes) {
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const fuzz::Case c{.collective = Collective::kReduce,
                           .dtype = dt,
                           .op = ops[k],
                           .count = count,
                           .placement = kPlacements[k % 3],
                           .root = static_cast<int>(k % static_cast<std::size_t>(n))};
        HOOP_RETURN_IF_ERROR(run(c));
      }
      for (std::size_t p = 0; p < 3; ++p) {
        const int root = static_cast<int>((p + 1) % static_cast<std::size_t>(n));
        std::vector<std::size_t> uneven;  // rank r: count + r, the last rank none
        for (int r = 0; r < n; ++r) uneven.push_back(r == n - 1 ? 0 : count + r);
        for (Collective kind : {Collective::kGather, Collective::kScatter}) {
          HOOP_RETURN_IF_ERROR(run({.collective = kind,
                                    .dtype = dt,
                                    .count = count,
                                    .placement = kPlacements[p],
                                    .root = root}));
        }
        for (Collective kind : {Collective::kGatherv, Collective::kScatterv}) {
          HOOP_RETURN_IF_ERROR(run({.collective = kind,
                                    .dtype = dt,
                                    .counts = uneven,
                                    .placement = kPlacements[p],
                                    .root = root}));
        }
      }
    }
  }
  return index;
}

Result<std::uint64_t> check_p2p(Communicator& comm, const std::vector<std::size_t>& counts,
                                const std::vector<DataType>& dtypes,
                                std::vector<std::string>& problems) {
  const int n = comm.size(), me = comm.rank();
  if (n < 2) return std::uint64_t{0};
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  // The bytes of message k from rank `from`.
  auto message = [](int from, std::int32_t k, std::size_t bytes) {
    std::vector<std::byte> v(bytes);
    fuzz::fill_random(0x9e37,
                      static_cast<std::uint64_t>(from) << 32 | static_cast<std::uint32_t>(k),
                      v.data(), bytes);
    return v;
  };
  auto check = [&](const std::vector<std::byte>& got, int from, std::int32_t k, const char* how) {
    if (got != message(from, k, got.size()))
      problems.push_back(fmt::format("rank {}: {} message {} from rank {} ({} bytes) differs", me,
                                     how, k, from, got.size()));
  };
  std::int32_t k = 0;
  for (std::size_t count : counts) {
    for (DataType dt : dtypes) {
      const std::size_t bytes = count * dtype_size(dt);
      const std::vector<std::byte> out = message(me, k, bytes);
      std::vector<std::byte> in(bytes);
      HOOP_RETURN_IF_ERROR(
          sendrecv(comm, {.data = out.data(), .count = count, .dtype = dt, .peer = next, .tag = k},
                   {.data = in.data(), .count = count, .dtype = dt, .peer = prev, .tag = k}));
      check(in, prev, k++, "sendrecv");
    }
  }
  // A chain: rank 0 sends first, every other rank receives and then sends on.
  for (std::size_t count : counts) {
    const std::vector<std::byte> out = message(me, k, count * 8);
    std::vector<std::byte> in(count * 8);
    const SendOptions s{
        .data = out.data(), .count = count, .dtype = DataType::kF64, .peer = next, .tag = k};
    const RecvOptions r{
        .data = in.data(), .count = count, .dtype = DataType::kF64, .peer = prev, .tag = k};
    if (me == 0) HOOP_RETURN_IF_ERROR(send(comm, s));
    HOOP_RETURN_IF_ERROR(recv(comm, r));
    if (me != 0) HOOP_RETURN_IF_ERROR(send(comm, s));
    check(in, prev, k++, "recv");
  }
  return static_cast<std::uint64_t>(k);
}

}  // namespace hoop::comm_check
