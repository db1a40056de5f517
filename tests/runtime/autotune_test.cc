// The autotuner's search (runtime/autotune.h) on a synthetic job whose allreduce throughput is a
// known function of the settings: it must find the best settings, say so in its log, and
// discard the warm-up and each trial's settling sample. The runtime's use of it, over real
// processes, is in tests/torch/autotune_test.py.
#include "runtime/autotune.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace hoop::runtime {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

/// Bytes per second of the synthetic job: best at 16 MiB, 2.5 ms and the tree, each knob
/// contributing on its own.
double throughput(const TunedSettings& s) {
  double score = 100e6;
  score -= s.fusion_threshold == 16 * kMiB ? 0 : 20e6;
  score -= s.cycle == std::chrono::microseconds(2500) ? 0 : 10e6;
  score -= s.algorithm == Algorithm::kTree ? 0 : 5e6;
  return score;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Autotuner, FindsTheBestSettingsAndExplainsTheChoice) {
  const std::string log = ::testing::TempDir() + "hoop_autotune_test.csv";
  const TunedSettings start{128 * kMiB, std::chrono::microseconds(1000), Algorithm::kAuto};
  auto tuner = Autotuner::create(
      start, {.warmup_samples = 2, .steps_per_sample = 4, .samples_per_trial = 3, .log_path = log});
  ASSERT_TRUE(tuner.ok()) << tuner.status().to_string();
  TunedSettings in_force = start;
  auto now = Autotuner::Clock::time_point{};
  int steps = 0;
  while (!tuner->done() && steps < 100000) {
    now += std::chrono::milliseconds(1);
    ++steps;
    // The warm-up is wild: a tuner that scored it would be misled.
    const double rate = steps < 12 ? 1e12 : throughput(in_force);
    if (auto next = tuner->record(static_cast<std::size_t>(rate / 1000), now)) in_force = *next;
    EXPECT_EQ(in_force, tuner->current());
  }
  ASSERT_TRUE(tuner->done());
  const TunedSettings best{16 * kMiB, std::chrono::microseconds(2500), Algorithm::kTree};
  EXPECT_EQ(in_force, best);
  // 1 start + 5 more fusion thresholds + 4 more cycle times + 4 more algorithms.
  EXPECT_EQ(tuner->trials().size(), 14u);
  for (const auto& t : tuner->trials())
    EXPECT_DOUBLE_EQ(t.score, throughput(t.settings)) << "a settling sample was scored";

  const std::string text = read(log);
  EXPECT_EQ(text.rfind("trial,knob,fusion_threshold_bytes,cycle_time_ms,algorithm,", 0), 0u)
      << text;
  EXPECT_NE(text.find("\n1,start,134217728,1,auto,"), std::string::npos) << text;
  EXPECT_NE(text.find("# chosen after 14 trials: fusion threshold 16777216 bytes, cycle time 2.5 "
                      "ms, algorithm tree, scoring 100.00 MB/s"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the choice is +53.8%"), std::string::npos) << text;  // 100 / 65
  EXPECT_NE(text.find("# algorithm: tree 100.00 MB/s;"), std::string::npos) << text;
  // Each pass lists every value it compared, also when a later pass moved the other knobs:
  // the fusion pass ran at 1 ms and auto, 2.5 ms and the tree came later.
  EXPECT_NE(text.find("# fusion threshold: 16777216 bytes 85.00 MB/s;"), std::string::npos) << text;
  EXPECT_NE(text.find("; 0 bytes 65.00 MB/s"), std::string::npos) << text;
  std::filesystem::remove(log);
}

TEST(Autotuner, KeepsTheStartingSettingsWhenNothingBeatsThem) {
  const TunedSettings start{16 * kMiB, std::chrono::microseconds(2500), Algorithm::kTree};
  auto tuner = Autotuner::create(
      start, {.warmup_samples = 0, .steps_per_sample = 1, .samples_per_trial = 1});
  ASSERT_TRUE(tuner.ok());
  TunedSettings in_force = start;
  auto now = Autotuner::Clock::time_point{};
  while (!tuner->done()) {
    now += std::chrono::milliseconds(1);
    if (auto next = tuner->record(static_cast<std::size_t>(throughput(in_force) / 1000), now))
      in_force = *next;
  }
  EXPECT_EQ(in_force, start);
}

TEST(Autotuner, RefusesBadOptionsAndAnUnwritableLog) {
  EXPECT_EQ(Autotuner::create({}, {.steps_per_sample = 0}).status().code(),
            StatusCode::kInvalidArgument);
  const auto missing = Autotuner::create({}, {.log_path = "/nonexistent-dir/autotune.csv"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  EXPECT_NE(missing.status().message().find("/nonexistent-dir/autotune.csv"), std::string::npos);
}

}  // namespace
}  // namespace hoop::runtime
