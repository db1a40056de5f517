#include "tests/comm/comm_rooted.h"

#include <fmt/format.h>

#include <algorithm>

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
        // reduce_scatterv: rank r's count is `count` + r, the first rank's none.
        fuzz::Case v{.collective = Collective::kReduceScatterv,
                     .dtype = dt,
                     .op = ops[k],
                     .placement = kPlacements[(k + 1) % 3]};
        for (int r = 0; r < n; ++r) v.counts.push_back(r == 0 ? 0 : count + r);
        HOOP_RETURN_IF_ERROR(run(v));
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

namespace {

/// `cases` of the fuzzer's random cases (seed `seed`) on `comm`; what went wrong goes to
/// `problems`.
Status random_cases(Communicator& comm, std::uint64_t seed, std::uint64_t cases,
                    std::vector<std::string>& problems) {
  fuzz::JobShape shape;
  shape.size = comm.size();
  shape.max_bytes = std::size_t{1} << 18;
  fuzz::CaseRunner runner(comm);
  for (std::uint64_t k = 0; k < cases; ++k) {
    const fuzz::Case c = fuzz::make_case(seed, k, shape);
    std::vector<std::string> found;
    HOOP_RETURN_IF_ERROR(runner.run(c, found).with_context(fuzz::describe(c)));
    for (const std::string& f : found)
      problems.push_back(fmt::format("rank {} of {}: {}: {}", comm.rank(), comm.size(),
                                     fuzz::describe(c), f));
  }
  return Status::success();
}

}  // namespace

Result<std::uint64_t> check_split_async(Communicator& comm, std::vector<std::string>& problems) {
  const int n = comm.size(), me = comm.rank();
  constexpr std::uint64_t kCases = 40;
  HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> half, split(comm, me % 2, -me));
  HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> copy, dup(comm));
  HOOP_RETURN_IF_ERROR(random_cases(*half, 71 + static_cast<std::uint64_t>(me % 2), kCases,
                                    problems));
  HOOP_RETURN_IF_ERROR(random_cases(*copy, 73, kCases / 4, problems));

  // Non-blocking calls of every kind at once, on comm and its dup; integers, so exact.
  auto expect = [&](bool ok, std::string what) {
    if (!ok) problems.push_back(fmt::format("rank {}: {}", me, what));
  };
  const std::int64_t total = std::int64_t{n} * (n - 1) / 2;  // the sum of the ranks
  std::vector<Request> requests;
  std::vector<std::vector<std::int64_t>> sums;
  for (std::size_t count : {std::size_t{1}, std::size_t{4099}, (std::size_t{1} << 18) + 3})
    sums.emplace_back(count, me);
  for (auto& s : sums)
    requests.push_back(iallreduce(s.size() > 1000 ? *copy : comm,
                                  {.output = s.data(), .count = s.size(), .dtype = DataType::kI64}));
  std::int64_t bcast = me == n - 1 ? 42 : 0, reduced = -1, scattered = -1, mine = me;
  std::vector<std::int64_t> gathered(static_cast<std::size_t>(n), -1), ranks(gathered.size());
  for (int r = 0; r < n; ++r) ranks[static_cast<std::size_t>(r)] = r;
  std::vector<std::size_t> counts(gathered.size());
  for (int r = 0; r < n; ++r) counts[static_cast<std::size_t>(r)] = static_cast<std::size_t>(r % 3);
  std::size_t all = 0;
  for (std::size_t c : counts) all += c;
  std::vector<std::int64_t> rs_in(all, 1), rs_out(counts[static_cast<std::size_t>(me)], -1);
  requests.push_back(ibroadcast(comm, {.buffer = &bcast, .count = 1, .dtype = DataType::kI64,
                                       .root = n - 1}));
  requests.push_back(ireduce(*copy, {.input = &mine, .output = &reduced, .count = 1,
                                     .dtype = DataType::kI64, .root = 0}));
  requests.push_back(igather(comm, {.input = &mine, .output = gathered.data(), .count = 1,
                                    .dtype = DataType::kI64, .root = 0}));
  requests.push_back(iscatter(*copy, {.input = ranks.data(), .output = &scattered, .count = 1,
                                      .dtype = DataType::kI64, .root = 0}));
  requests.push_back(ireduce_scatterv(comm, {.input = rs_in.data(), .output = rs_out.data(),
                                             .counts = counts, .dtype = DataType::kI64}));
  std::int64_t from_left = -1;
  if (n > 1)
    requests.push_back(isendrecv(
        comm, {.data = &mine, .count = 1, .dtype = DataType::kI64, .peer = (me + 1) % n},
        {.data = &from_left, .count = 1, .dtype = DataType::kI64, .peer = (me + n - 1) % n}));
  requests.push_back(ibarrier(*copy));
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) HOOP_RETURN_IF_ERROR(it->wait());
  for (std::size_t k = 0; k < sums.size(); ++k)
    expect(std::all_of(sums[k].begin(), sums[k].end(), [&](std::int64_t v) { return v == total; }),
           fmt::format("iallreduce of {} x i64", sums[k].size()));
  expect(bcast == 42, "ibroadcast");
  expect(me != 0 || reduced == total, "ireduce");
  expect(me != 0 || gathered == ranks, "igather");
  expect(scattered == me, "iscatter");
  expect(std::all_of(rs_out.begin(), rs_out.end(), [&](std::int64_t v) { return v == n; }),
         "ireduce_scatterv");
  expect(n == 1 || from_left == (me + n - 1) % n, "isendrecv");
  return 2 * kCases + kCases / 4 + requests.size();
}

Result<std::uint64_t> check_more(Communicator& comm, const std::vector<std::size_t>& counts,
                                 const std::vector<DataType>& dtypes,
                                 const std::vector<ReduceOp>& ops,
                                 std::vector<std::string>& problems) {
  HOOP_ASSIGN_OR_RETURN(std::uint64_t rooted, check_rooted(comm, counts, dtypes, ops, problems));
  HOOP_ASSIGN_OR_RETURN(std::uint64_t p2p, check_p2p(comm, counts, dtypes, problems));
  HOOP_ASSIGN_OR_RETURN(std::uint64_t more, check_split_async(comm, problems));
  return rooted + p2p + more;
}

}  // namespace hoop::comm_check
