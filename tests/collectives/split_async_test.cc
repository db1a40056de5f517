// split, dup and the non-blocking calls (hoop/communicator.h) with ranks as threads over the
// loopback transport: sub-communicators reuse their parent's connections and keep its order,
// every collective on them is exact (the fuzzer's random cases), requests complete and may be
// waited for in any order, blocking calls come after the calls started before them, and a
// failure fails every call still pending, naming its cause.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "collectives/algorithms/group.h"
#include "tests/collectives/loopback_transport.h"
#include "tests/fuzz/fuzz_case.h"
#include "tests/fuzz/fuzz_runner.h"

namespace hoop::testing {
namespace {

void expect_all_ok(const std::vector<Status>& statuses) {
  for (std::size_t r = 0; r < statuses.size(); ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].to_string();
}

/// The sum over `comm`'s ranks of `value` (i64), by a blocking allreduce.
Result<std::int64_t> sum_of(Communicator& comm, std::int64_t value) {
  HOOP_RETURN_IF_ERROR(allreduce(
      comm, {.output = &value, .count = 1, .dtype = DataType::kI64, .op = ReduceOp::kSum}));
  return value;
}

/// Fails unless `got` equals `want`, naming `what`.
Status expect_eq(std::int64_t got, std::int64_t want, std::string_view what) {
  if (got == want) return Status::success();
  return internal_error(fmt::format("{}: got {}, expected {}", what, got, want));
}

/// `count` fuzzer cases of every collective (seed `seed`) on `comm`, checked bit for bit.
Status run_random_cases(Communicator& comm, std::uint64_t seed, std::uint64_t count) {
  fuzz::JobShape shape;
  shape.size = comm.size();
  shape.max_bytes = std::size_t{1} << 16;
  fuzz::CaseRunner runner(comm);
  for (std::uint64_t k = 0; k < count; ++k) {
    const fuzz::Case c = fuzz::make_case(seed, k, shape);
    std::vector<std::string> problems;
    HOOP_RETURN_IF_ERROR(runner.run(c, problems).with_context(fuzz::describe(c)));
    if (!problems.empty())
      return internal_error(fmt::format("rank {} of {}: {}: {}", comm.rank(), comm.size(),
                                        fuzz::describe(c), problems.front()));
  }
  return Status::success();
}

class SplitRanks : public ::testing::TestWithParam<int> {};

// Colors by parity, keys reversed: the new ranks count down, the groups run every collective
// exactly, and the parent's calls still work between and after theirs.
TEST_P(SplitRanks, GroupsByColorOrderedByKey) {
  const int n = GetParam();
  expect_all_ok(on_ranks(n, [n](Communicator& comm) -> Status {
    const int me = comm.rank();
    HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> half, split(comm, me % 2, -me));
    if (half == nullptr) return internal_error("split gave no communicator for a color");
    // Members of my color, by descending parent rank.
    std::vector<int> members;
    for (int r = n - 1; r >= 0; --r)
      if (r % 2 == me % 2) members.push_back(r);
    HOOP_RETURN_IF_ERROR(expect_eq(half->size(), static_cast<std::int64_t>(members.size()), "size"));
    const auto at = std::find(members.begin(), members.end(), me) - members.begin();
    HOOP_RETURN_IF_ERROR(expect_eq(half->rank(), at, "rank"));
    // Calls on the two communicators interleave, in one order on every rank.
    HOOP_ASSIGN_OR_RETURN(std::int64_t in_half, sum_of(*half, me));
    HOOP_RETURN_IF_ERROR(expect_eq(in_half, std::accumulate(members.begin(), members.end(), 0),
                                   "sum over the half"));
    HOOP_ASSIGN_OR_RETURN(std::int64_t in_all, sum_of(comm, me));
    HOOP_RETURN_IF_ERROR(expect_eq(in_all, n * (n - 1) / 2, "sum over the parent"));
    std::vector<std::int64_t> order(members.size());
    const std::int64_t mine = me;
    HOOP_RETURN_IF_ERROR(allgather(
        *half, {.input = &mine, .output = order.data(), .count = 1, .dtype = DataType::kI64}));
    for (std::size_t i = 0; i < members.size(); ++i)
      HOOP_RETURN_IF_ERROR(expect_eq(order[i], members[i], fmt::format("allgather[{}]", i)));
    HOOP_RETURN_IF_ERROR(run_random_cases(*half, 41 + static_cast<std::uint64_t>(me % 2), 40));
    return run_random_cases(comm, 43, 10);
  }));
}

// kNoColor leaves a rank out; a group split again (and a dup) outlives the communicator it came
// from, and all of them keep one order on the shared connections.
TEST_P(SplitRanks, NoColorNestedSplitAndDup) {
  const int n = GetParam();
  expect_all_ok(on_ranks(n, [n](Communicator& comm) -> Status {
    const int me = comm.rank();
    const bool out = n > 1 && me == 1;
    HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> rest,
                          split(comm, out ? kNoColor : 7, me));
    if (out != (rest == nullptr)) return internal_error("kNoColor and a communicator disagree");
    std::unique_ptr<Communicator> inner, copy;
    if (rest != nullptr) {
      HOOP_RETURN_IF_ERROR(expect_eq(rest->size(), n - (n > 1 ? 1 : 0), "size of the rest"));
      // The first half and the second half of the rest, each reversed.
      const int half = rest->rank() < rest->size() / 2 ? 0 : 1;
      HOOP_ASSIGN_OR_RETURN(inner, split(*rest, half, -rest->rank()));
      HOOP_ASSIGN_OR_RETURN(copy, dup(*rest));
      HOOP_RETURN_IF_ERROR(expect_eq(copy->rank(), rest->rank(), "dup's rank"));
      rest.reset();  // the nested communicators outlive it
      HOOP_ASSIGN_OR_RETURN(std::int64_t inner_size, sum_of(*inner, 1));
      HOOP_RETURN_IF_ERROR(expect_eq(inner_size, inner->size(), "size of the inner group"));
      HOOP_ASSIGN_OR_RETURN(std::int64_t sum_of_copy, sum_of(*copy, me));
      HOOP_RETURN_IF_ERROR(expect_eq(sum_of_copy, n * (n - 1) / 2 - (n > 1 ? 1 : 0), "dup's sum"));
      HOOP_RETURN_IF_ERROR(run_random_cases(*inner, 47, 15));
      HOOP_RETURN_IF_ERROR(run_random_cases(*copy, 53, 15));
    }
    return run_random_cases(comm, 59, 5);
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, SplitRanks, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& p) { return fmt::format("{}Ranks", p.param); });

TEST(Split, RefusesANegativeColorOtherThanNoColor) {
  expect_all_ok(on_ranks(3, [](Communicator& comm) -> Status {
    Result<std::unique_ptr<Communicator>> got = split(comm, -5, 0);
    if (got.ok() || got.status().code() != StatusCode::kInvalidArgument ||
        got.status().message().find("color -5") == std::string::npos)
      return internal_error("split(-5) did not fail naming the color: " +
                            got.status().to_string());
    return Status::success();
  }));
}

// A failure in a group aborts the connections it shares: its peers and the parent's calls fail
// with the same cause.
TEST(Split, AFailureInAGroupFailsTheParentToo) {
  const auto statuses = on_ranks(3, [](Communicator& comm) -> Status {
    HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> all, dup(comm));
    if (comm.rank() == 2) all->transport().abort(aborted("rank 2 gave up"));
    std::int64_t v = 1;
    const Status in_dup = allreduce(*all, {.output = &v, .count = 1, .dtype = DataType::kI64});
    const Status in_parent = allreduce(comm, {.output = &v, .count = 1, .dtype = DataType::kI64});
    if (in_dup.ok()) return internal_error("the dup's allreduce succeeded");
    return in_parent.ok() ? internal_error("the parent's allreduce succeeded") : in_parent;
  });
  for (std::size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    EXPECT_NE(statuses[r].message().find("rank 2 gave up"), std::string::npos)
        << "rank " << r << ": " << statuses[r].to_string();
  }
}

// A split communicator's errors count in its own numbering, the job's in brackets: job rank 0,
// which is rank 2 of a group ordered by descending job rank, gives up in the group's words, and
// every other member reads which rank that is in both numberings.
TEST(Split, ErrorsNameRanksInTheGroupsNumberingWithTheJobsInBrackets) {
  const auto statuses = on_ranks(3, [](Communicator& comm) -> Status {
    HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> group, split(comm, 0, -comm.rank()));
    if (comm.rank() == 0) group->transport().abort(aborted("rank 2 gave up"));
    std::int64_t v = 1;
    const Status s = allreduce(*group, {.output = &v, .count = 1, .dtype = DataType::kI64});
    return s.ok() ? internal_error("the group's allreduce succeeded") : s;
  });
  for (std::size_t r = 0; r < statuses.size(); ++r)
    EXPECT_NE(statuses[r].message().find("rank 2 [job rank 0] gave up"), std::string::npos)
        << "rank " << r << ": " << statuses[r].to_string();
}

TEST(GroupNumbering, RewritesEachUnmarkedRankOnce) {
  const std::vector<int> members = {3, 1};  // group rank 0 is job rank 3, group rank 1 job rank 1
  EXPECT_EQ(collectives::to_group_numbering(
                "tcp: rank 3 (10.0.0.2) lost; rank 5 aborted: rank 1 [job rank 3] gave up", members),
            "tcp: rank 0 [job rank 3] (10.0.0.2) lost; job rank 5 aborted: rank 1 [job rank 3] "
            "gave up");
  // Plural lists, other words and numbers that run on are no rank of this form.
  EXPECT_EQ(collectives::to_group_numbering("ranks 1, 3; frank 3; rank 3a; rank ", members),
            "ranks 1, 3; frank 3; rank 3a; rank ");
  EXPECT_EQ(collectives::mark_group_numbering("rank 1 and rank 0 differ; rank 7", members),
            "rank 1 [job rank 1] and rank 0 [job rank 3] differ; rank 7");
  // What was marked once is left alone by both.
  const std::string marked = collectives::mark_group_numbering("rank 0 gave up", members);
  EXPECT_EQ(collectives::to_group_numbering(marked, members), marked);
  EXPECT_EQ(collectives::mark_group_numbering(marked, members), marked);
}

class AsyncRanks : public ::testing::TestWithParam<int> {};

// Many calls in flight, waited for in reverse order, each exact; test() polls one to the end.
TEST_P(AsyncRanks, CallsInFlightCompleteAndWaitInAnyOrder) {
  const int n = GetParam();
  expect_all_ok(on_ranks(n, [n](Communicator& comm) -> Status {
    const int me = comm.rank();
    constexpr int kCalls = 8;
    std::vector<std::vector<std::int64_t>> sums(kCalls);
    std::vector<Request> requests;
    for (int k = 0; k < kCalls; ++k) {
      const std::size_t count = (std::size_t{1} << (2 * k)) + static_cast<std::size_t>(k);
      sums[static_cast<std::size_t>(k)].assign(count, me + k);
      requests.push_back(iallreduce(comm, {.output = sums[static_cast<std::size_t>(k)].data(),
                                           .count = count,
                                           .dtype = DataType::kI64}));
    }
    std::vector<std::int64_t> gathered(static_cast<std::size_t>(n));
    const std::int64_t mine = me;
    requests.push_back(iallgather(
        comm, {.input = &mine, .output = gathered.data(), .count = 1, .dtype = DataType::kI64}));
    std::vector<std::size_t> counts(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) counts[static_cast<std::size_t>(r)] = static_cast<std::size_t>(r);
    const std::size_t total = static_cast<std::size_t>(n * (n - 1) / 2);
    std::vector<std::int64_t> rs_in(total, 1), rs_out(static_cast<std::size_t>(me));
    requests.push_back(ireduce_scatterv(
        comm, {.input = rs_in.data(), .output = rs_out.data(), .counts = counts,
               .dtype = DataType::kI64}));
    requests.push_back(ibarrier(comm));
    for (auto it = requests.rbegin(); it != requests.rend(); ++it) HOOP_RETURN_IF_ERROR(it->wait());
    for (int k = 0; k < kCalls; ++k)
      for (std::int64_t v : sums[static_cast<std::size_t>(k)])
        HOOP_RETURN_IF_ERROR(expect_eq(v, n * (n - 1) / 2 + n * k, fmt::format("call {}", k)));
    for (int r = 0; r < n; ++r)
      HOOP_RETURN_IF_ERROR(expect_eq(gathered[static_cast<std::size_t>(r)], r, "iallgather"));
    for (std::int64_t v : rs_out) HOOP_RETURN_IF_ERROR(expect_eq(v, n, "ireduce_scatterv"));
    // test() until done, then the same answer from wait().
    std::int64_t one = 1;
    Request r = iallreduce(comm, {.output = &one, .count = 1, .dtype = DataType::kI64});
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      HOOP_ASSIGN_OR_RETURN(bool done, r.test());
      if (done) break;
      if (std::chrono::steady_clock::now() > give_up) return timeout_error("test() never said done");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    HOOP_RETURN_IF_ERROR(r.wait());
    return expect_eq(one, n, "polled call");
  }));
}

// A blocking call after non-blocking ones runs after them on every rank, on the same
// communicator and on one split from it; isendrecv passes a ring.
TEST_P(AsyncRanks, BlockingCallsAndSplitsKeepTheStartedOrder) {
  const int n = GetParam();
  expect_all_ok(on_ranks(n, [n](Communicator& comm) -> Status {
    const int me = comm.rank();
    HOOP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> copy, dup(comm));
    std::vector<float> big(std::size_t{1} << 18, 1.0f);
    Request first = iallreduce(comm, {.output = big.data(), .count = big.size()});
    std::int64_t v = me;
    Request second = iallreduce(*copy, {.output = &v, .count = 1, .dtype = DataType::kI64});
    HOOP_ASSIGN_OR_RETURN(std::int64_t blocking, sum_of(comm, 1));
    HOOP_RETURN_IF_ERROR(expect_eq(blocking, n, "blocking sum"));
    HOOP_RETURN_IF_ERROR(second.wait());
    HOOP_RETURN_IF_ERROR(first.wait());
    HOOP_RETURN_IF_ERROR(expect_eq(v, n * (n - 1) / 2, "sum on the dup"));
    for (float f : big)
      if (f != static_cast<float>(n)) return internal_error(fmt::format("big sum {}", f));
    if (n == 1) return Status::success();
    const std::int64_t out = me;
    std::int64_t in = -1;
    Request ring = isendrecv(
        comm, {.data = &out, .count = 1, .dtype = DataType::kI64, .peer = (me + 1) % n},
        {.data = &in, .count = 1, .dtype = DataType::kI64, .peer = (me + n - 1) % n});
    HOOP_RETURN_IF_ERROR(ring.wait());
    return expect_eq(in, (me + n - 1) % n, "isendrecv");
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, AsyncRanks, ::testing::Values(1, 2, 3, 5),
                         [](const auto& p) { return fmt::format("{}Ranks", p.param); });

// A rank that fails before its calls: every call the others have pending fails, naming the
// cause, and so do the calls started after the failure.
TEST(Async, AFailureFailsEveryPendingCallNamingIt) {
  std::vector<std::vector<Status>> results(3);
  on_ranks(3, [&](Communicator& comm) -> Status {
    if (comm.rank() == 1) {
      comm.transport().abort(aborted("rank 1 gave up"));
      return Status::success();
    }
    std::vector<std::int64_t> data(4096, 1);
    std::vector<Request> requests;
    for (int k = 0; k < 4; ++k)
      requests.push_back(iallreduce(comm, {.output = data.data(), .count = data.size(),
                                           .dtype = DataType::kI64}));
    for (Request& r : requests) results[static_cast<std::size_t>(comm.rank())].push_back(r.wait());
    return Status::success();
  });
  for (int r : {0, 2}) {
    ASSERT_EQ(results[static_cast<std::size_t>(r)].size(), 4u);
    for (const Status& s : results[static_cast<std::size_t>(r)]) {
      EXPECT_FALSE(s.ok()) << "rank " << r;
      EXPECT_NE(s.message().find("rank 1 gave up"), std::string::npos)
          << "rank " << r << ": " << s.to_string();
    }
  }
}

// Destroying a communicator waits for its calls; a request outlives it.
TEST(Async, DestroyingACommunicatorFinishesItsCalls) {
  std::vector<Request> kept(2);
  std::vector<std::vector<float>> data(2, std::vector<float>(std::size_t{1} << 16, 2.0f));
  expect_all_ok(on_ranks(2, [&](Communicator& comm) -> Status {
    const auto me = static_cast<std::size_t>(comm.rank());
    kept[me] = iallreduce(comm, {.output = data[me].data(), .count = data[me].size()});
    return Status::success();  // on_ranks destroys the communicator
  }));
  for (std::size_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(kept[r].valid());
    Result<bool> done = kept[r].test();
    ASSERT_TRUE(done.ok()) << done.status().to_string();
    EXPECT_TRUE(*done);
    EXPECT_EQ(data[r].front(), 4.0f);
    EXPECT_EQ(data[r].back(), 4.0f);
  }
}

TEST(Async, AnEmptyRequestIsInvalid) {
  Request r;
  EXPECT_FALSE(r.valid());
  EXPECT_EQ(r.wait().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.test().status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hoop::testing
