// hoop's collectives with every rank a thread of this process, over the loopback transport
// (loopback_transport.h): each allreduce algorithm at 1-9 ranks over counts (0, 1, 2, primes
// up to 4099, past every algorithm's small-message switch),
// every dtype, every op and each placement (a separate input, in place, a null input), the
// other collectives likewise, in posting order and with shuffled arrival. The loopback
// transport itself passes the transport conformance bodies first.
//
// Results are checked bit for bit by the fuzzer's CaseRunner (tests/fuzz), whose inputs make
// every reduction exact, and the guards around every buffer with it. The hierarchical
// allreduce needs a job of several hosts and stays with the process tests (tests/comm).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms/comm_impl.h"
#include "tests/collectives/loopback_transport.h"
#include "tests/fuzz/fuzz_case.h"
#include "tests/fuzz/fuzz_runner.h"
#include "tests/transports/transport_conformance.h"

namespace hoop::testing {
namespace {

constexpr std::size_t kCounts[] = {0, 1, 2, 7, 61, 1031, 4099};
// i16 shares its code paths with i8 and i32 here; the process tests and the fuzzer cover it
// (kAllDataTypes), which keeps this matrix within the suite's time.
constexpr DataType kDtypes[] = {DataType::kU8,  DataType::kI8,   DataType::kI32, DataType::kI64,
                                DataType::kF16, DataType::kBF16, DataType::kF32, DataType::kF64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProd};
constexpr fuzz::Placement kPlacements[] = {fuzz::Placement::kSeparate, fuzz::Placement::kAliased,
                                           fuzz::Placement::kNullInput};

/// Runs `body(rank, transport)` on a thread per rank of an in-process job.
void on_threads(int ranks, std::uint64_t shuffle,
                const std::function<void(int, std::unique_ptr<Transport>)>& body) {
  auto fabric = make_loopback_fabric(ranks, shuffle);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] { body(r, loopback_transport(fabric, r)); });
  for (auto& t : threads) t.join();
}

/// Runs the cases on every rank of an in-process job; returns what went wrong, one line each.
std::vector<std::string> run_cases(int ranks, std::uint64_t shuffle,
                                   const std::vector<fuzz::Case>& cases,
                                   const std::vector<int>& ring_order = {}) {
  std::vector<std::vector<std::string>> problems(static_cast<std::size_t>(ranks));
  on_threads(ranks, shuffle, [&](int r, std::unique_ptr<Transport> t) {
    collectives::CommImpl comm(std::move(t), Algorithm::kAuto, std::chrono::seconds(60),
                               collectives::CostParams{});
    if (!ring_order.empty()) {
      ASSERT_TRUE(comm.set_ring_order(ring_order).ok());
    }
    fuzz::CaseRunner runner(comm);
    auto& mine = problems[static_cast<std::size_t>(r)];
    for (const fuzz::Case& c : cases) {
      std::vector<std::string> found;
      const Status s = runner.run(c, found);
      for (const std::string& f : found)
        mine.push_back(fmt::format("rank {}: {}: {}", r, fuzz::describe(c), f));
      if (!s.ok()) {
        mine.push_back(fmt::format("rank {}: {}: {}", r, fuzz::describe(c), s.to_string()));
        comm.transport().abort(s);  // the other ranks fail at once instead of at the deadline
        return;
      }
    }
  });
  std::vector<std::string> all;
  for (auto& p : problems) all.insert(all.end(), p.begin(), p.end());
  return all;
}

/// A case with the varying fields set; offsets vary with the index so buffers sit at odd
/// addresses too.
fuzz::Case make(std::uint64_t index, Collective collective, DataType dtype, std::size_t count) {
  fuzz::Case c;
  c.seed = 23;
  c.index = index;
  c.data_key = 0x9e3779b97f4a7c15ull * (index + 1);
  c.collective = collective;
  c.dtype = dtype;
  c.count = count;
  c.input_offset = static_cast<int>(index % 5);
  c.output_offset = static_cast<int>(index % 3) * 4;
  return c;
}

std::string report(const std::vector<std::string>& problems) {
  std::string s = fmt::format("{} problem(s):", problems.size());
  for (std::size_t i = 0; i < problems.size() && i < 20; ++i) s += "\n  " + problems[i];
  return s;
}

struct Job {
  int ranks;
  bool shuffled;
};

std::string job_name(const Job& j) {
  return fmt::format("{}Ranks{}", j.ranks, j.shuffled ? "Shuffled" : "InOrder");
}

// Every size in posting order; shuffled arrival at a pair, odd sizes, a power of two and the
// largest (the suite's time on 2 cores is the budget).
std::vector<Job> every_job() {
  std::vector<Job> jobs;
  for (int n = 1; n <= 9; ++n) jobs.push_back({n, false});
  for (int n : {2, 3, 5, 8, 9}) jobs.push_back({n, true});
  return jobs;
}

std::uint64_t shuffle_seed(const Job& j) {
  return j.shuffled ? 1000 + static_cast<std::uint64_t>(j.ranks) : 0;
}

class AllreduceInProcess : public ::testing::TestWithParam<std::tuple<Algorithm, Job>> {};

TEST_P(AllreduceInProcess, EveryCountDtypeOpAndPlacementIsExact) {
  const auto [algorithm, job] = GetParam();
  std::vector<fuzz::Case> cases;
  for (std::size_t count : kCounts)
    for (DataType dt : kDtypes)
      for (ReduceOp op : kOps)
        for (fuzz::Placement p : kPlacements) {
          fuzz::Case c = make(cases.size(), Collective::kAllreduce, dt, count);
          c.op = op;
          c.algorithm = algorithm;
          c.placement = p;
          cases.push_back(c);
        }
  const auto problems = run_cases(job.ranks, shuffle_seed(job), cases);
  EXPECT_TRUE(problems.empty()) << report(problems);
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, AllreduceInProcess,
    ::testing::Combine(::testing::Values(Algorithm::kRing, Algorithm::kRecursiveDoubling,
                                         Algorithm::kTree, Algorithm::kRabenseifner),
                       ::testing::ValuesIn(every_job())),
    [](const auto& p) {
      return std::string(algorithm_name(std::get<0>(p.param))) + "_" +
             job_name(std::get<1>(p.param));
    });

class CollectivesInProcess : public ::testing::TestWithParam<Job> {};

// Reduce-scatter over every op, broadcast from every root, allgather and alltoall, each over
// the counts and dtypes and their placements.
TEST_P(CollectivesInProcess, EveryCollectiveCountAndDtypeIsExact) {
  const Job job = GetParam();
  std::vector<fuzz::Case> cases;
  for (std::size_t count : kCounts) {
    for (DataType dt : kDtypes) {
      for (ReduceOp op : kOps) {
        for (fuzz::Placement p : kPlacements) {
          fuzz::Case c = make(cases.size(), Collective::kReduceScatter, dt, count);
          c.op = op;
          c.placement = p;
          cases.push_back(c);
        }
      }
      for (int root = 0; root < job.ranks; ++root) {
        fuzz::Case c = make(cases.size(), Collective::kBroadcast, dt, count);
        c.root = root;
        cases.push_back(c);
      }
      for (Collective k : {Collective::kAllgather, Collective::kAlltoall}) {
        for (fuzz::Placement p : kPlacements) {
          fuzz::Case c = make(cases.size(), k, dt, count);
          c.placement = p;
          cases.push_back(c);
        }
      }
    }
  }
  cases.push_back(make(cases.size(), Collective::kBarrier, DataType::kU8, 0));
  const auto problems = run_cases(job.ranks, shuffle_seed(job), cases);
  EXPECT_TRUE(problems.empty()) << report(problems);
}

// The rooted collectives: reduce over every op (roots first and last, the placements in turn),
// gather and scatter in each placement (the root moving with it), over the counts and dtypes;
// and reduce_scatterv, whose per-rank counts the other tests leave to the random cases.
TEST_P(CollectivesInProcess, EveryRootedCollectiveCountAndDtypeIsExact) {
  const Job job = GetParam();
  std::vector<fuzz::Case> cases;
  for (std::size_t count : kCounts) {
    for (DataType dt : kDtypes) {
      for (std::size_t k = 0; k < std::size(kOps); ++k) {
        for (int root : {0, job.ranks - 1}) {
          fuzz::Case c = make(cases.size(), Collective::kReduce, dt, count);
          c.op = kOps[k];
          c.root = root;
          c.placement = kPlacements[(k + static_cast<std::size_t>(root)) % std::size(kPlacements)];
          cases.push_back(c);
        }
      }
      for (Collective kind : {Collective::kGather, Collective::kScatter}) {
        for (std::size_t p = 0; p < std::size(kPlacements); ++p) {
          fuzz::Case c = make(cases.size(), kind, dt, count);
          c.placement = kPlacements[p];
          c.root = static_cast<int>(p) % job.ranks;
          cases.push_back(c);
        }
      }
      // reduce_scatterv: every op, the placements in turn; rank r's count is `count` + r, with
      // every third rank's zero.
      for (std::size_t k = 0; k < std::size(kOps); ++k) {
        fuzz::Case c = make(cases.size(), Collective::kReduceScatterv, dt, 0);
        for (int r = 0; r < job.ranks; ++r)
          c.counts.push_back(r % 3 == 2 ? 0 : count + static_cast<std::size_t>(r));
        c.op = kOps[k];
        c.placement = kPlacements[k % std::size(kPlacements)];
        cases.push_back(c);
      }
    }
  }
  const auto problems = run_cases(job.ranks, shuffle_seed(job), cases);
  EXPECT_TRUE(problems.empty()) << report(problems);
}

// The variable-count collectives (allgatherv, alltoallv, gatherv, scatterv,
// reduce_scatterv) with the fuzzer's own random counts
// (some zero), and a random mix of everything, 300 cases a job.
TEST_P(CollectivesInProcess, RandomCasesOfEveryCollectiveAreExact) {
  const Job job = GetParam();
  fuzz::JobShape shape;
  shape.size = job.ranks;
  shape.max_bytes = std::size_t{1} << 18;
  std::vector<fuzz::Case> cases;
  for (std::uint64_t k = 0; k < 300; ++k) cases.push_back(fuzz::make_case(77, k, shape));
  const auto problems = run_cases(job.ranks, shuffle_seed(job), cases);
  EXPECT_TRUE(problems.empty()) << report(problems);
}

INSTANTIATE_TEST_SUITE_P(Jobs, CollectivesInProcess, ::testing::ValuesIn(every_job()),
                         [](const auto& p) { return job_name(p.param); });

// Buffers of a million elements and more, past every pipeline's slice and staging window:
// each allreduce algorithm and every other collective at a few rank counts (the process tests
// keep one such job per transport). The sanitizer build runs the 3-rank job.
class LargeBuffersInProcess : public ::testing::TestWithParam<Job> {};

TEST_P(LargeBuffersInProcess, EveryAlgorithmAndCollectiveIsExact) {
  const Job job = GetParam();
  constexpr std::size_t kBig = (std::size_t{1} << 20) + 3;
  constexpr std::size_t kPerRank = (std::size_t{1} << 17) + 3;
  std::vector<fuzz::Case> cases;
  const auto add = [&](Collective k, DataType dt, std::size_t count, ReduceOp op,
                       fuzz::Placement p) {
    fuzz::Case c = make(cases.size(), k, dt, count);
    c.op = op;
    c.placement = p;
    cases.push_back(c);
    return &cases.back();
  };
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kTree,
                      Algorithm::kRabenseifner}) {
    add(Collective::kAllreduce, DataType::kF32, kBig, ReduceOp::kSum, fuzz::Placement::kSeparate)
        ->algorithm = a;
    add(Collective::kAllreduce, DataType::kF32, kBig, ReduceOp::kSum, fuzz::Placement::kAliased)
        ->algorithm = a;
    add(Collective::kAllreduce, DataType::kBF16, kBig, ReduceOp::kAvg, fuzz::Placement::kSeparate)
        ->algorithm = a;
    add(Collective::kAllreduce, DataType::kI32, kBig, ReduceOp::kProd, fuzz::Placement::kNullInput)
        ->algorithm = a;
  }
  add(Collective::kReduceScatter, DataType::kF32, kPerRank, ReduceOp::kSum,
      fuzz::Placement::kSeparate);
  add(Collective::kReduceScatter, DataType::kF64, kPerRank, ReduceOp::kMax,
      fuzz::Placement::kAliased);
  fuzz::Case* rsv = add(Collective::kReduceScatterv, DataType::kF32, 0, ReduceOp::kSum,
                        fuzz::Placement::kNullInput);
  for (int r = 0; r < job.ranks; ++r) rsv->counts.push_back(kPerRank * static_cast<std::size_t>(r % 3));
  add(Collective::kAllgather, DataType::kF32, kPerRank, ReduceOp::kSum, fuzz::Placement::kSeparate);
  // Blocks of 2 MiB and more are forwarded slice by slice (ring_allgatherv's pipeline).
  add(Collective::kAllgather, DataType::kF32, (std::size_t{1} << 19) + 3, ReduceOp::kSum,
      fuzz::Placement::kAliased);
  add(Collective::kAlltoall, DataType::kF32, kPerRank / 4, ReduceOp::kSum,
      fuzz::Placement::kAliased);
  for (int root : {0, job.ranks - 1}) {
    add(Collective::kBroadcast, DataType::kF32, kBig, ReduceOp::kSum, fuzz::Placement::kSeparate)
        ->root = root;
    // Past the reduce's switch to the ring, in place on the root and not.
    add(Collective::kReduce, DataType::kF32, kBig, ReduceOp::kSum, fuzz::Placement::kSeparate)
        ->root = root;
    add(Collective::kReduce, DataType::kBF16, kBig, ReduceOp::kAvg, fuzz::Placement::kAliased)
        ->root = root;
    add(Collective::kGather, DataType::kF32, kPerRank, ReduceOp::kSum, fuzz::Placement::kAliased)
        ->root = root;
    add(Collective::kScatter, DataType::kF32, kPerRank, ReduceOp::kSum, fuzz::Placement::kNullInput)
        ->root = root;
  }
  const auto problems = run_cases(job.ranks, shuffle_seed(job), cases);
  EXPECT_TRUE(problems.empty()) << report(problems);
}

INSTANTIATE_TEST_SUITE_P(Jobs, LargeBuffersInProcess,
                         ::testing::Values(Job{3, true}, Job{5, true}, Job{8, false}),
                         [](const auto& p) { return job_name(p.param); });

// A ring that visits the ranks out of rank order (as topology lays it over interleaved hosts:
// here the even ranks, then the odd): the ring allreduce, reduce-scatter (chunk r still ends on
// rank r), allgather and the ring broadcast chain stay exact.
// Past 64 ranks the per-rank sizes of gather, scatter, allgather and alltoall move from the
// stack to the heap (collectives::RankSizes): 70 ranks, each collective in each placement.
TEST(ManyRanksInProcess, BlockCollectivesPastSixtyFourRanksAreExact) {
  constexpr int kRanks = 70;
  std::vector<fuzz::Case> cases;
  for (Collective kind :
       {Collective::kGather, Collective::kScatter, Collective::kAllgather, Collective::kAlltoall}) {
    for (std::size_t p = 0; p < std::size(kPlacements); ++p) {
      fuzz::Case c = make(cases.size(), kind, DataType::kF32, 3);
      c.placement = kPlacements[p];
      c.root = static_cast<int>(p * 31) % kRanks;
      cases.push_back(c);
    }
  }
  const auto problems = run_cases(kRanks, 0, cases);
  EXPECT_TRUE(problems.empty()) << report(problems);
}

TEST(RingOrderInProcess, APermutedRingIsExact) {
  for (int n : {3, 5, 8}) {
    std::vector<int> order;
    for (int r = 0; r < n; r += 2) order.push_back(r);
    for (int r = 1; r < n; r += 2) order.push_back(r);
    std::vector<fuzz::Case> cases;
    for (std::size_t count : {std::size_t{1}, std::size_t{61}, std::size_t{4099}}) {
      for (DataType dt : {DataType::kI32, DataType::kF32, DataType::kBF16}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
          fuzz::Case a = make(cases.size(), Collective::kAllreduce, dt, count);
          a.op = op;
          a.algorithm = Algorithm::kRing;
          cases.push_back(a);
          fuzz::Case rs = make(cases.size(), Collective::kReduceScatter, dt, count);
          rs.op = op;
          cases.push_back(rs);
        }
        cases.push_back(make(cases.size(), Collective::kAllgather, dt, count));
        for (int root = 0; root < n; ++root) {
          fuzz::Case b = make(cases.size(), Collective::kBroadcast, dt, count * 300);
          b.root = root;
          cases.push_back(b);
        }
      }
    }
    const auto problems = run_cases(n, 0, cases, order);
    EXPECT_TRUE(problems.empty()) << n << " ranks: " << report(problems);
  }
}

// The loopback transport keeps the contract the algorithms rely on: the conformance bodies
// every real transport passes, with ranks as threads.
TEST(LoopbackTransport, PassesTheConformanceBodies) {
  using Body = std::function<void(int, int, Transport&)>;
  const std::vector<std::pair<int, Body>> bodies = {
      {2, [](int r, int, Transport& t) { ping_pong_every_size(r, t); }},
      {3, [](int r, int n, Transport& t) { all_pairs_keep_order(r, n, t, 50); }},
      {3, [](int r, int n, Transport& t) { empty_messages_in_a_row(r, n, t); }},
      {2, [](int r, int, Transport& t) { length_mismatch_then_stream_goes_on(r, t); }},
      {2, [](int r, int, Transport& t) { big_message_long_before_its_receive(r, t); }},
      {2, [](int r, int, Transport& t) { test_polls_without_blocking_and_consumes(r, t); }},
      {2, [](int r, int, Transport& t) { bad_arguments_are_refused(r, t); }},
      {2, [](int r, int, Transport& t) { orderly_shutdown_then_later_receives_fail(r, t); }},
      {2, [](int r, int, Transport& t) { wait_deadline_names_the_peer_and_aborts(r, t); }},
      {3, [](int r, int, Transport& t) { abort_carries_the_cause_to_every_peer(r, t); }},
  };
  for (std::uint64_t shuffle : {0, 5}) {
    for (const auto& [ranks, body] : bodies) {
      on_threads(ranks, shuffle,
                 [&, n = ranks](int r, std::unique_ptr<Transport> t) { body(r, n, *t); });
    }
  }
}

}  // namespace
}  // namespace hoop::testing
