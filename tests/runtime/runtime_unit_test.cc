// The runtime's pure parts: message encoding, the coordinator's negotiation table, the
// response cache and the scale kernel, without processes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/scale.h"
#include "hoop/hoop.h"
#include "runtime/controller.h"
#include "runtime/coordinator.h"
#include "runtime/message.h"

namespace hoop::runtime {
namespace {

Request allreduce(const std::string& name, std::vector<std::int64_t> shape = {4},
                  DataType dtype = DataType::kF32) {
  Request r;
  r.name = name;
  r.type = OpType::kAllreduce;
  r.dtype = dtype;
  r.op = ReduceOp::kSum;
  r.shape = std::move(shape);
  return r;
}

RequestList list_of(std::vector<Request> requests) {
  RequestList l;
  l.requests = std::move(requests);
  return l;
}

std::vector<std::string> names(const Response& r) {
  std::vector<std::string> out;
  for (const auto& t : r.tensors) out.push_back(t->name);
  return out;
}

const Clock::time_point kT0 = Clock::now();

TEST(BuildFlags, MpiBuiltIsTrueWhereTheMpiTransportIsCompiledIn) {
#ifdef HOOP_HAVE_MPI
  EXPECT_TRUE(hoop::mpi_built());
#else
  EXPECT_FALSE(hoop::mpi_built());
#endif
}

TEST(Message, ListsRoundTrip) {
  RequestList rl;
  Request r = allreduce("grad/w", {3, 5}, DataType::kBF16);
  r.prescale = 0.5;
  r.group = "grad/w";
  r.group_size = 2;
  rl.requests = {r, allreduce("b")};
  rl.cached = {7, 9};
  rl.join = true;
  auto back = decode_request_list(encode(rl));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->requests.size(), 2u);
  EXPECT_TRUE(same_description(back->requests[0], r));
  EXPECT_EQ(back->cached, rl.cached);
  EXPECT_TRUE(back->join);
  EXPECT_FALSE(back->shutdown);

  EXPECT_FALSE(back->tuning.has_value());

  RequestList tuned;
  tuned.tuning = Tuning{1 << 20, Algorithm::kRing, 2500, 64};
  back = decode_request_list(encode(tuned));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_TRUE(back->tuning.has_value());
  EXPECT_EQ(back->tuning->fusion_threshold, 1u << 20);
  EXPECT_EQ(back->tuning->algorithm, Algorithm::kRing);
  EXPECT_EQ(back->tuning->cycle_us, 2500);
  EXPECT_EQ(back->tuning->cache_capacity, 64);
}

TEST(Message, CachedSlotsTravelAsABitVectorWhenDense) {
  RequestList dense;
  for (std::uint32_t s = 0; s < 400; ++s) dense.cached.push_back(s);
  const std::string bytes = encode(dense);
  EXPECT_LT(bytes.size(), 80u);  // 400 bits, not 400 integers
  auto back = decode_request_list(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->cached, dense.cached);
  RequestList sparse;
  sparse.cached = {3, 1000000};
  back = decode_request_list(encode(sparse));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->cached, sparse.cached);
}

TEST(Message, ListsReusedForTheNextRoundHoldOnlyTheNextRound) {
  // The controller encodes and decodes into the same lists and strings every round.
  RequestList big = list_of({allreduce("a"), allreduce("b")});
  big.cached = {1, 2, 3};
  big.join = big.shutdown = true;
  big.tuning = Tuning{1 << 20, Algorithm::kRing, 2500, 64};
  big.carries = true;
  big.carried = std::string(64, 'x');
  RequestList small;
  small.cached = {5};
  small.carries = true;
  small.carried = "12345678";
  std::string bytes;
  RequestList into;
  encode(big, bytes);
  ASSERT_TRUE(decode_request_list(bytes, into).ok());
  ASSERT_EQ(into.requests.size(), 2u);
  encode(small, bytes);
  EXPECT_EQ(bytes, encode(small));
  ASSERT_TRUE(decode_request_list(bytes, into).ok());
  EXPECT_TRUE(into.requests.empty());
  EXPECT_EQ(into.cached, small.cached);
  EXPECT_FALSE(into.join || into.shutdown || into.tuning.has_value());
  EXPECT_TRUE(into.carries);
  EXPECT_EQ(into.carried, small.carried);
  into.clear();
  EXPECT_EQ(encode(into), encode(RequestList()));

  ResponseList responses;
  Response& r = responses.responses.add();
  r.type = OpType::kBroadcast;
  r.tensors.push_back(std::make_shared<const Request>(allreduce("a")));
  r.slots = {4};
  r.first_dims = {1, 2};
  r.joined = {1};
  r.error = "mismatch";
  r.algorithm = Algorithm::kRing;
  r.carried = true;
  r.inputs = "abc";
  responses.join_done_last = 1;
  responses.shutdown = true;
  responses.shutdown_by = 0;
  responses.clear();
  EXPECT_TRUE(responses.responses.empty());
  EXPECT_EQ(responses.join_done_last, -1);
  EXPECT_FALSE(responses.shutdown);
  EXPECT_EQ(responses.shutdown_by, -1);
  const Response& again = responses.responses.add();
  EXPECT_EQ(again.type, OpType::kAllreduce);
  EXPECT_TRUE(again.tensors.empty() && again.slots.empty() && again.first_dims.empty() &&
              again.joined.empty() && again.error.empty() && again.inputs.empty());
  EXPECT_EQ(again.algorithm, Algorithm::kAuto);
  EXPECT_FALSE(again.carried);
}

TEST(Message, CorruptBytesAreAProtocolErrorNotACrash) {
  const std::string good = encode(list_of({allreduce("a"), allreduce("b")}));
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    auto r = decode_request_list(good.substr(0, cut));
    EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << cut;
  }
  std::string huge = good;
  huge[0] = '\xff';
  huge[1] = '\xff';
  EXPECT_EQ(decode_request_list(huge).status().code(), StatusCode::kProtocolError);
  EXPECT_EQ(decode_request_list(good + "x").status().code(), StatusCode::kProtocolError);
  std::string bad_enum = good;
  bad_enum[4 + 4 + 1] = 99;  // the first request's operation byte
  EXPECT_EQ(decode_request_list(bad_enum).status().code(), StatusCode::kProtocolError);
}

TEST(Coordinator, ATensorRunsOnceEveryRankSubmittedIt) {
  ResponseCache cache(16);
  Coordinator c(3, 1 << 20, cache);
  ASSERT_TRUE(c.add(0, list_of({allreduce("a")}), kT0).ok());
  ASSERT_TRUE(c.add(2, list_of({allreduce("a")}), kT0).ok());
  EXPECT_FALSE(c.has_ready());
  ASSERT_TRUE(c.add(1, list_of({allreduce("a")}), kT0).ok());
  ASSERT_TRUE(c.has_ready());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(names(l.responses[0]), std::vector<std::string>{"a"});
  EXPECT_TRUE(l.responses[0].error.empty());
  EXPECT_FALSE(c.has_ready());
}

TEST(Coordinator, DifferentSubmissionOrdersGiveOneOrderAndFuseCompatibleTensors) {
  ResponseCache cache(16);
  Coordinator c(2, 1 << 20, cache);
  Request f64 = allreduce("d", {4}, DataType::kF64);
  ASSERT_TRUE(c.add(0, list_of({allreduce("a"), allreduce("b"), f64, allreduce("c")}), kT0).ok());
  ASSERT_TRUE(c.add(1, list_of({allreduce("c"), f64, allreduce("b"), allreduce("a")}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 2u);
  EXPECT_EQ(names(l.responses[0]), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(names(l.responses[1]), std::vector<std::string>{"d"});
}

TEST(Coordinator, FusionStopsAtTheThreshold) {
  ResponseCache cache(16);
  Coordinator c(1, 40, cache);  // 16-byte tensors: two fit in 40 bytes
  ASSERT_TRUE(c.add(0, list_of({allreduce("a"), allreduce("b"), allreduce("c")}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 2u);
  EXPECT_EQ(names(l.responses[0]), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(names(l.responses[1]), std::vector<std::string>{"c"});
}

TEST(Coordinator, AMismatchNamesTheTensorTheFieldTheValuesAndTheRanks) {
  ResponseCache cache(16);
  Coordinator c(3, 1 << 20, cache);
  ASSERT_TRUE(c.add(0, list_of({allreduce("grad/w", {2, 3})}), kT0).ok());
  ASSERT_TRUE(c.add(1, list_of({allreduce("grad/w", {2, 4})}), kT0).ok());
  ASSERT_TRUE(c.add(2, list_of({allreduce("grad/w", {2, 3})}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(l.responses[0].error,
            "tensor 'grad/w': ranks disagree on the shape: [2, 3] on ranks 0, 2; [2, 4] on rank 1");
  Request other = allreduce("x");
  Request op = other;
  op.op = ReduceOp::kMax;
  ASSERT_TRUE(c.add(0, list_of({other}), kT0).ok());
  ASSERT_TRUE(c.add(1, list_of({op}), kT0).ok());
  ASSERT_TRUE(c.add(2, list_of({other}), kT0).ok());
  EXPECT_NE(c.take_ready().responses[0].error.find(
                "disagree on the op: sum on ranks 0, 2; max on rank 1"),
            std::string::npos);
}

TEST(Coordinator, DeviceAndRootMismatchesAreNamed) {
  ResponseCache cache(16);
  Coordinator c(2, 1 << 20, cache);
  Request cpu = allreduce("d");
  Request gpu = cpu;
  gpu.device = 1;
  ASSERT_TRUE(c.add(0, list_of({cpu}), kT0).ok());
  ASSERT_TRUE(c.add(1, list_of({gpu}), kT0).ok());
  EXPECT_EQ(c.take_ready().responses[0].error,
            "tensor 'd': ranks disagree on the device: cpu on rank 0; cuda on rank 1");
}

TEST(Coordinator, AllgatherFirstDimensionsMayDifferAndAreReported) {
  ResponseCache cache(16);
  Coordinator c(2, 1 << 20, cache);
  Request a = allreduce("g", {2, 3});
  a.type = OpType::kAllgather;
  Request b = a;
  b.shape = {5, 3};
  ASSERT_TRUE(c.add(0, list_of({a}), kT0).ok());
  ASSERT_TRUE(c.add(1, list_of({b}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_TRUE(l.responses[0].error.empty()) << l.responses[0].error;
  EXPECT_EQ(l.responses[0].first_dims, (std::vector<std::int64_t>{2, 5}));
}

TEST(Coordinator, AGroupRunsOnlyWhenAllItsMembersAreReady) {
  ResponseCache cache(16);
  Coordinator c(2, 1 << 20, cache);
  Request a = allreduce("a");
  Request b = allreduce("b");
  a.group = b.group = "a";
  a.group_size = b.group_size = 2;
  ASSERT_TRUE(c.add(0, list_of({a, b}), kT0).ok());
  ASSERT_TRUE(c.add(1, list_of({a}), kT0).ok());
  EXPECT_FALSE(c.has_ready());
  ASSERT_TRUE(c.add(1, list_of({b}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(names(l.responses[0]), (std::vector<std::string>{"a", "b"}));
}

TEST(Coordinator, JoinedRanksCountAsReadyAndTheLastToJoinIsReported) {
  ResponseCache cache(16);
  Coordinator c(3, 1 << 20, cache);
  RequestList join;
  join.join = true;
  ASSERT_TRUE(c.add(2, join, kT0).ok());
  ASSERT_TRUE(c.add(0, list_of({allreduce("a")}), kT0).ok());
  ASSERT_TRUE(c.add(1, list_of({allreduce("a")}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(l.responses[0].joined, std::vector<std::int32_t>{2});
  EXPECT_EQ(l.join_done_last, -1);
  Request bc = allreduce("b");
  bc.type = OpType::kBroadcast;
  bc.root = 0;
  ASSERT_TRUE(c.add(0, list_of({bc}), kT0).ok());
  ASSERT_TRUE(c.add(1, list_of({bc}), kT0).ok());
  l = c.take_ready();
  EXPECT_NE(l.responses[0].error.find("broadcast needs every rank, but rank 2 joined"),
            std::string::npos)
      << l.responses[0].error;
  ASSERT_TRUE(c.add(0, join, kT0).ok());
  ASSERT_TRUE(c.add(1, join, kT0).ok());
  EXPECT_EQ(c.take_ready().join_done_last, 1);
}

// One rank's shutdown ends the runtime of every rank at once (Horovod's semantics): what the
// others have pending fails naming that rank, and nobody waits for the others' shutdowns.
TEST(Coordinator, OneRanksShutdownFailsWhatCanNeverRunNamingIt) {
  ResponseCache cache(16);
  Coordinator c(3, 1 << 20, cache);
  RequestList bye;
  bye.shutdown = true;
  ASSERT_TRUE(c.add(0, list_of({allreduce("lonely")}), kT0).ok());
  ASSERT_TRUE(c.add(2, list_of({allreduce("lonely")}), kT0).ok());
  EXPECT_FALSE(c.has_ready());
  ASSERT_TRUE(c.add(1, bye, kT0).ok());
  ASSERT_TRUE(c.has_ready());
  ResponseList l = c.take_ready();
  EXPECT_TRUE(l.shutdown);
  EXPECT_EQ(l.shutdown_by, 1);
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(l.responses[0].error,
            "tensor 'lonely': rank 1 shut down the job before rank 1 submitted it");
}

TEST(Coordinator, StallReportNamesTheMissingRanksOncePerInterval) {
  ResponseCache cache(16);
  Coordinator c(4, 1 << 20, cache);
  ASSERT_TRUE(c.add(0, list_of({allreduce("slow")}), kT0).ok());
  ASSERT_TRUE(c.add(2, list_of({allreduce("slow")}), kT0).ok());
  const auto later = kT0 + std::chrono::seconds(61);
  EXPECT_TRUE(c.stalled(kT0 + std::chrono::seconds(10), std::chrono::seconds(60)).empty());
  auto lines = c.stalled(later, std::chrono::seconds(60));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "tensor 'slow' (allreduce) submitted by ranks 0, 2 61 s ago; waiting for ranks 1, 3");
  EXPECT_TRUE(c.stalled(later + std::chrono::seconds(1), std::chrono::seconds(60)).empty());
  EXPECT_TRUE(c.stalled_longer_than(later, std::chrono::seconds(60)));
}

TEST(Coordinator, DuplicateSubmissionIsAProtocolError) {
  ResponseCache cache(16);
  Coordinator c(2, 1 << 20, cache);
  ASSERT_TRUE(c.add(1, list_of({allreduce("a")}), kT0).ok());
  Status s = c.add(1, list_of({allreduce("a")}), kT0);
  EXPECT_EQ(s.code(), StatusCode::kProtocolError);
  EXPECT_NE(s.message().find("rank 1 submitted tensor 'a' while it was still pending"),
            std::string::npos);
}

TEST(ResponseCache, SlotsAreStableAndAFullCacheTakesNoNewNames) {
  ResponseCache cache(2);
  cache.put(allreduce("a"));
  cache.put(allreduce("b"));
  cache.put(allreduce("c"));
  EXPECT_EQ(cache.find(allreduce("a")), 0u);
  EXPECT_EQ(cache.find(allreduce("b")), 1u);
  EXPECT_FALSE(cache.find(allreduce("c")));
  // A new description for a known name replaces it in its slot.
  cache.put(allreduce("a", {8}));
  EXPECT_FALSE(cache.find(allreduce("a")));
  EXPECT_EQ(cache.find(allreduce("a", {8})), 0u);
  Request g = allreduce("g");
  g.type = OpType::kAllgather;
  ResponseCache other(4);
  other.put(g);
  EXPECT_EQ(other.size(), 0u);  // first dimensions vary: not cached
}

TEST(Coordinator, CachedSlotsStandForTheirDescription) {
  ResponseCache cache(4);
  cache.put(allreduce("a"));
  Coordinator c(2, 1 << 20, cache);
  RequestList bits;
  bits.cached = {0};
  ASSERT_TRUE(c.add(1, bits, kT0).ok());
  ASSERT_TRUE(c.add(0, list_of({allreduce("a")}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_TRUE(l.responses[0].error.empty());
  bits.cached = {3};
  EXPECT_EQ(c.add(1, bits, kT0).code(), StatusCode::kProtocolError);
}

RequestList slots(std::vector<std::uint32_t> cached) {
  RequestList l;
  l.cached = std::move(cached);
  return l;
}

TEST(CoordinatorFastPath, CachedTensorsReadyEverywhereAreCountedNotCompared) {
  ResponseCache cache(8);
  cache.put(allreduce("a"));
  cache.put(allreduce("b"));
  Coordinator c(3, 1 << 20, cache);
  ASSERT_TRUE(c.add(0, slots({1, 0}), kT0).ok());
  ASSERT_TRUE(c.add(2, slots({0, 1}), kT0).ok());
  EXPECT_FALSE(c.has_ready());
  // A rank whose cache had not caught up describes the tensor in full: counted all the same.
  ASSERT_TRUE(c.add(1, list_of({allreduce("b"), allreduce("a")}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(names(l.responses[0]), (std::vector<std::string>{"b", "a"}));
  EXPECT_TRUE(l.responses[0].error.empty());
  EXPECT_EQ(c.fast_path_tensors(), 6u);
  // The next step takes the same path.
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(c.add(r, slots({0, 1}), kT0).ok());
  EXPECT_EQ(c.take_ready().responses.size(), 1u);
  EXPECT_EQ(c.fast_path_tensors(), 12u);
}

TEST(CoordinatorFastPath, ADifferentDescriptionMeetsTheSlotsInTheFullTable) {
  ResponseCache cache(8);
  cache.put(allreduce("a"));
  Coordinator c(3, 1 << 20, cache);
  ASSERT_TRUE(c.add(0, slots({0}), kT0).ok());
  ASSERT_TRUE(c.add(2, slots({0}), kT0).ok());
  ASSERT_TRUE(c.add(1, list_of({allreduce("a", {5})}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(l.responses[0].error,
            "tensor 'a': ranks disagree on the shape: [4] on ranks 0, 2; [5] on rank 1");
}

TEST(CoordinatorFastPath, ASlotSentTwiceIsAProtocolError) {
  ResponseCache cache(8);
  cache.put(allreduce("a"));
  Coordinator c(2, 1 << 20, cache);
  ASSERT_TRUE(c.add(1, slots({0}), kT0).ok());
  Status s = c.add(1, slots({0}), kT0);
  EXPECT_EQ(s.code(), StatusCode::kProtocolError);
  EXPECT_NE(s.message().find("rank 1 submitted tensor 'a' while it was still pending"),
            std::string::npos)
      << s.message();
}

TEST(CoordinatorFastPath, WaitingSlotsAreReportedAsStalled) {
  ResponseCache cache(8);
  cache.put(allreduce("a"));
  Coordinator c(3, 1 << 20, cache);
  ASSERT_TRUE(c.add(1, slots({0}), kT0).ok());
  const auto later = kT0 + std::chrono::seconds(61);
  EXPECT_FALSE(c.stalled_longer_than(kT0 + std::chrono::seconds(1), std::chrono::seconds(60)));
  EXPECT_TRUE(c.stalled_longer_than(later, std::chrono::seconds(60)));
  auto lines = c.stalled(later, std::chrono::seconds(60));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "tensor 'a' (allreduce) submitted by rank 1 61 s ago; waiting for ranks 0, 2");
  EXPECT_TRUE(c.stalled(later + std::chrono::seconds(1), std::chrono::seconds(60)).empty());
}

TEST(CoordinatorFastPath, AJoinMovesWaitingSlotsToTheFullTable) {
  ResponseCache cache(8);
  cache.put(allreduce("a"));
  Coordinator c(3, 1 << 20, cache);
  ASSERT_TRUE(c.add(0, slots({0}), kT0).ok());
  RequestList join;
  join.join = true;
  ASSERT_TRUE(c.add(2, join, kT0).ok());
  EXPECT_FALSE(c.has_ready());
  ASSERT_TRUE(c.add(1, slots({0}), kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(l.responses[0].joined, std::vector<std::int32_t>{2});
  EXPECT_TRUE(l.responses[0].error.empty());
}

TEST(CoordinatorFastPath, SlotsSentWithAJoinDoNotWaitForTheJoinedRank) {
  ResponseCache cache(8);
  cache.put(allreduce("a"));
  Coordinator c(3, 1 << 20, cache);
  RequestList both = slots({0});
  both.join = true;
  ASSERT_TRUE(c.add(1, both, kT0).ok());
  ASSERT_TRUE(c.add(0, slots({0}), kT0).ok());
  RequestList join;
  join.join = true;
  ASSERT_TRUE(c.add(2, join, kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(names(l.responses[0]), std::vector<std::string>{"a"});
  EXPECT_FALSE(c.stalled_longer_than(kT0 + std::chrono::hours(1), std::chrono::seconds(1)));
}

TEST(CoordinatorFastPath, ShutdownFailsWaitingSlotsNamingTheMissingRank) {
  ResponseCache cache(8);
  cache.put(allreduce("a"));
  Coordinator c(2, 1 << 20, cache);
  RequestList bye = slots({0});
  bye.shutdown = true;
  ASSERT_TRUE(c.add(0, bye, kT0).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(l.responses[0].error, "tensor 'a': rank 0 shut down the job before rank 1 submitted it");
}

TEST(RuntimeSettings, ComeFromTheEnvironmentAndHorovodNames) {
  ::setenv("HOROVOD_FUSION_THRESHOLD", "1M", 1);
  ::setenv("HOOP_CYCLE_TIME_MS", "2.5", 1);
  ::setenv("HOOP_CACHE_CAPACITY", "7", 1);
  auto s = runtime_settings_from_env();
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->fusion_threshold, std::size_t{1} << 20);
  EXPECT_EQ(s->cycle, std::chrono::microseconds(2500));
  EXPECT_EQ(s->cache_capacity, 7u);
  EXPECT_EQ(s->stall_check, std::chrono::seconds(60));
  ::unsetenv("HOROVOD_FUSION_THRESHOLD");
  ::unsetenv("HOOP_CYCLE_TIME_MS");
  ::unsetenv("HOOP_CACHE_CAPACITY");
}

TEST(RuntimeSettings, MalformedValuesNameTheVariable) {
  for (const char* var :
       {"HOOP_FUSION_THRESHOLD", "HOOP_CYCLE_TIME_MS", "HOOP_CACHE_CAPACITY",
        "HOOP_STALL_CHECK_SECONDS", "HOOP_STALL_SHUTDOWN_SECONDS", "HOOP_TIMELINE_MAX_BYTES"}) {
    ::setenv(var, "lots", 1);
    auto s = runtime_settings_from_env();
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << var;
    EXPECT_NE(s.status().message().find(var), std::string::npos) << s.status().message();
    ::unsetenv(var);
  }
}

TEST(Scale, ScalesFloatsAndIntegersAsHorovodDoes) {
  std::vector<float> f = {1, 2, 3};
  ASSERT_TRUE(scale_copy(f.data(), f.data(), 3, DataType::kF32, 0.5).ok());
  EXPECT_EQ(f, (std::vector<float>{0.5f, 1.0f, 1.5f}));
  std::vector<std::uint16_t> bf = {0x3f80, 0x4000};  // 1, 2 in bf16
  std::vector<std::uint16_t> out(2);
  ASSERT_TRUE(scale_copy(out.data(), bf.data(), 2, DataType::kBF16, 2.0).ok());
  EXPECT_EQ(out, (std::vector<std::uint16_t>{0x4000, 0x4080}));
  // Integers: in float64, truncated toward zero, held within the type's range.
  std::vector<std::int32_t> i = {3, -3, 7, 2000000000};
  ASSERT_TRUE(scale_copy(i.data(), i.data(), 4, DataType::kI32, 1.5).ok());
  EXPECT_EQ(i, (std::vector<std::int32_t>{4, -4, 10, 2147483647}));
  std::vector<std::uint8_t> u = {10, 255};
  ASSERT_TRUE(scale_copy(u.data(), u.data(), 2, DataType::kU8, -0.5).ok());
  EXPECT_EQ(u, (std::vector<std::uint8_t>{0, 0}));
  std::vector<std::int64_t> l = {9};
  ASSERT_TRUE(scale_copy(l.data(), l.data(), 1, DataType::kI64, 1.0 / 3).ok());
  EXPECT_EQ(l, (std::vector<std::int64_t>{3}));
}

TEST(Scale, BuffersNeedNoAlignment) {
  // Tensors packed one after another (the small inputs of a negotiation message) start at any
  // byte; the sanitizer build checks that no element is read or written misaligned.
  const double in[2] = {1.5, -3};
  std::vector<std::byte> a(1 + sizeof(in));
  std::vector<std::byte> b(3 + sizeof(in));
  std::memcpy(a.data() + 1, in, sizeof(in));
  ASSERT_TRUE(scale_copy(b.data() + 3, a.data() + 1, 2, DataType::kF64, 2.0).ok());
  double out[2];
  std::memcpy(out, b.data() + 3, sizeof(out));
  EXPECT_EQ(out[0], 3.0);
  EXPECT_EQ(out[1], -6.0);
  const std::uint16_t half_one = 0x3c00;  // 1 in f16
  std::memcpy(a.data() + 1, &half_one, 2);
  ASSERT_TRUE(scale_copy(b.data() + 3, a.data() + 1, 1, DataType::kF16, 0.5).ok());
  std::uint16_t half_out = 0;
  std::memcpy(&half_out, b.data() + 3, 2);
  EXPECT_EQ(half_out, 0x3800);  // 0.5
  const std::int32_t seven = 7;
  std::memcpy(a.data() + 1, &seven, 4);
  ASSERT_TRUE(scale_copy(a.data() + 1, a.data() + 1, 1, DataType::kI32, 2.0).ok());
  std::int32_t fourteen = 0;
  std::memcpy(&fourteen, a.data() + 1, 4);
  EXPECT_EQ(fourteen, 14);
}

}  // namespace
}  // namespace hoop::runtime
