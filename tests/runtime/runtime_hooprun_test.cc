// The runtime over real processes: hooprun launches runtime_check ranks, each playing one
// scenario (see runtime_check.cc); the tests check what every rank printed.
#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/launch/hooprun_harness.h"

namespace hoop {
namespace {

using launch::testing::count_lines_with;
using launch::testing::RunResult;
using launch::testing::TempDir;

/// Bounds a broken run; never a speed check.
constexpr std::chrono::seconds kDeadline{120};

RunResult run_ranks(int n, const std::vector<std::string>& args,
                    const std::vector<std::string>& env = {},
                    std::chrono::seconds deadline = kDeadline) {
  return launch::testing::run_ranks(HOOP_RUNTIME_CHECK_BIN, n, args, env, deadline);
}

/// Runs a scenario that every rank must pass.
void expect_ok(int n, const std::string& scenario, const std::vector<std::string>& args = {},
               const std::vector<std::string>& env = {}) {
  std::vector<std::string> all = {scenario};
  all.insert(all.end(), args.begin(), args.end());
  const RunResult r = run_ranks(n, all, env);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "ok " + scenario), n) << r.out << r.err;
}

class RuntimeSizes : public ::testing::TestWithParam<int> {};

// Every dtype and op through the runtime (fused and not), submitted in a different order on
// every rank, against a float64 reference.
TEST_P(RuntimeSizes, AllreducesInAnyOrderMatchTheReference) { expect_ok(GetParam(), "basic"); }
// Allgather (uneven first dimensions), broadcast, alltoall (uneven splits), reducescatter
// (uneven rows), grouped allreduce with prescale, barriers.
TEST_P(RuntimeSizes, EveryCollectiveMatchesTheReference) { expect_ok(GetParam(), "collectives"); }
INSTANTIATE_TEST_SUITE_P(Ranks, RuntimeSizes, ::testing::Values(1, 2, 3, 4, 8));

TEST(Runtime, AThousandMixedTensorsPerStepForThreeSteps) { expect_ok(2, "many", {"3"}); }

// No fusion, no cache, no batching: every tensor on its own path.
TEST(Runtime, FusionCacheAndBatchingCanBeTurnedOff) {
  expect_ok(3, "many", {"2"},
            {"HOOP_FUSION_THRESHOLD=0", "HOOP_CACHE_CAPACITY=0", "HOOP_CYCLE_TIME_MS=0"});
}

// A tiny fusion buffer and cache: many responses per step, slots running out mid-step.
TEST(Runtime, ASmallFusionBufferAndCache) {
  expect_ok(2, "many", {"3"}, {"HOOP_FUSION_THRESHOLD=4096", "HOOP_CACHE_CAPACITY=100"});
}

// hooprun checks every HOOP_* variable before it starts a rank (init() does too: see
// RuntimeSettings.MalformedValuesNameTheVariable).
TEST(Runtime, AMalformedSettingStopsTheJobNamingTheVariable) {
  const RunResult r = run_ranks(2, {"basic"}, {"HOOP_FUSION_THRESHOLD=lots"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_GE(count_lines_with(r.out + r.err, "HOOP_FUSION_THRESHOLD='lots' is malformed"), 1)
      << r.out << r.err;
}

TEST(Runtime, ResultsEqualTheCommunicatorsBitForBit) { expect_ok(3, "compare"); }

TEST(Runtime, LargeFusedBuffersArePipelined) { expect_ok(3, "fused_large"); }

TEST(Runtime, InitAndShutdownCycle) { expect_ok(2, "cycles"); }

TEST(Runtime, JoinWithUnevenStepCounts) {
  const RunResult r = run_ranks(3, {"join"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "last joined 2"), 3) << r.out << r.err;
}

TEST(Runtime, WaitingThreadsDriveTheSetAndUnwaitedWorkStillRuns) { expect_ok(3, "threads"); }

TEST(Runtime, WaitingThreadsDriveTheSetOverTcp) {
  expect_ok(2, "threads", {}, {"HOOP_TRANSPORT=tcp"});
}

TEST(Runtime, TwoOverlappingProcessSets) { expect_ok(3, "process_sets"); }

class RuntimeMismatch : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// Rank 1 disagrees on one field; every rank gets an error naming the tensor, the field, the
// values and the ranks, and the job goes on.
TEST_P(RuntimeMismatch, EveryRankNamesTheFieldValuesAndRanks) {
  const auto& [kind, message] = GetParam();
  const RunResult r = run_ranks(3, {"mismatch", kind});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(
      count_lines_with(r.out, "mismatch: mismatch: tensor 't': ranks disagree on the " + message),
      3)
      << r.out << r.err;
}
INSTANTIATE_TEST_SUITE_P(
    Fields, RuntimeMismatch,
    ::testing::Values(std::pair{"shape", "shape: [4, 4] on ranks 0, 2; [4, 5] on rank 1"},
                      std::pair{"dtype", "dtype: f32 on ranks 0, 2; f64 on rank 1"},
                      std::pair{"op", "op: sum on ranks 0, 2; max on rank 1"},
                      std::pair{"root", "root: 0 on ranks 0, 2; 1 on rank 1"},
                      std::pair{"scale", "prescale: 1 on ranks 0, 2; 2 on rank 1"},
                      std::pair{"operation",
                                "operation: allreduce on ranks 0, 2; broadcast on rank 1"}));

class RankZerosSetting : public ::testing::TestWithParam<const char*> {};

// Every rank's coordinator fuses and caches the same way: by rank 0's settings, which it
// announces, not by each rank's own environment (ranks fusing differently would call different
// collectives, and caches of different sizes would give one tensor different slots).
TEST_P(RankZerosSetting, HoldsOnEveryRank) {
  const std::string script = std::string("if [ \"$HOOP_RANK\" != 0 ]; then ") + "export " +
                             GetParam() + "; fi; exec '" + HOOP_RUNTIME_CHECK_BIN + "' many 2";
  const RunResult r = launch::testing::run_hooprun({"-np", "3", "/bin/sh", "-c", script}, {},
                                                   kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "ok many"), 3) << r.out << r.err;
}
INSTANTIATE_TEST_SUITE_P(Runtime, RankZerosSetting,
                         ::testing::Values("HOOP_FUSION_THRESHOLD=0", "HOOP_CACHE_CAPACITY=10",
                                           "HOOP_CACHE_CAPACITY=0"),
                         [](const auto& p) {
                           std::string name = p.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(Runtime, ANameSubmittedTwiceIsRefusedAtOnce) {
  const RunResult r = run_ranks(2, {"duplicate"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "was submitted again on rank"), 2) << r.out;
  EXPECT_EQ(count_lines_with(r.out, "tensor 'g0' appears twice in one grouped submission"), 2)
      << r.out;
}

TEST(Runtime, TheStallInspectorNamesTheMissingRank) {
  const RunResult r = run_ranks(3, {"stall"}, {"HOOP_STALL_CHECK_SECONDS=1"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_GE(
      count_lines_with(r.out + r.err, "stall: tensor 'late' (allreduce) submitted by ranks 0, 2",
                       "waiting for rank 1"),
      1)
      << r.out << r.err;
}

TEST(Runtime, AStallPastTheShutdownLimitFailsEveryRank) {
  const RunResult r = run_ranks(3, {"stall_shutdown"}, {"HOOP_STALL_SHUTDOWN_SECONDS=1"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "stalled:", "HOOP_STALL_SHUTDOWN_SECONDS=1: tensor 'never'"), 3)
      << r.out << r.err;
}

TEST(Runtime, ADeadRankFailsEveryOtherRankWithItsName) {
  const RunResult r = run_ranks(3, {"die"}, {}, std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "after death:", "rank 1"), 2) << r.out << r.err;
}

/// The events of a timeline file, which must parse as JSON.
nlohmann::json parse_timeline(const std::string& path) {
  const std::optional<std::string> text = launch::testing::read_file(path);
  EXPECT_TRUE(text.has_value()) << path;
  return nlohmann::json::parse(text.value_or("[]"));
}

TEST(Runtime, TheTimelineHasEveryPhaseAndParses) {
  TempDir dir;
  const std::string path = dir.file("timeline.json");
  expect_ok(2, "basic", {}, {"HOOP_TIMELINE=" + path});
  const nlohmann::json events = parse_timeline(path);
  std::set<std::string> phases;
  bool described = false;
  for (const auto& e : events) {
    if (e.value("ph", "") != "B") continue;
    phases.insert(e.value("name", ""));
    if (e.value("name", "") == "ALLREDUCE" && e.contains("args"))
      described = described || (e["args"].value("transport", "") == "shm" &&
                                !e["args"].value("algorithm", "").empty());
  }
  EXPECT_TRUE(described) << "ALLREDUCE events name their transport and algorithm";
  for (const char* p :
       {"QUEUE", "NEGOTIATE", "ALLREDUCE", "MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER"})
    EXPECT_TRUE(phases.contains(p)) << p;
}

class RuntimeCarried : public ::testing::TestWithParam<int> {};

// Small cached allreduces reduced from the inputs that came with their round: every dtype, op
// and scale against the reference and bit for bit against the collective's result, and the
// timeline shows them as such.
TEST_P(RuntimeCarried, SmallAllreducesMatchTheCollectivesBits) {
  TempDir dir;
  const std::string path = dir.file("timeline.json");
  expect_ok(GetParam(), "carried", {}, {"HOOP_TIMELINE=" + path});
  int carried = 0;
  for (const auto& e : parse_timeline(path))
    if (e.value("name", "") == "ALLREDUCE" && e.contains("args") &&
        e["args"].value("algorithm", "") == "carried")
      ++carried;
  EXPECT_GT(carried, 0) << "no ALLREDUCE event of a carried tensor";
}
INSTANTIATE_TEST_SUITE_P(Ranks, RuntimeCarried, ::testing::Values(1, 2, 3, 8));

TEST(Runtime, TheTimelineOfAKilledRankStillParses) {
  TempDir dir;
  const RunResult r = run_ranks(3, {"die"}, {"HOOP_TIMELINE=" + dir.file("tl-%r.json")});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    const nlohmann::json events = parse_timeline(dir.file("tl-" + std::to_string(rank) + ".json"));
    EXPECT_GT(events.size(), 5u) << rank;
  }
}

}  // namespace
}  // namespace hoop
