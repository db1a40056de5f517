// train_fashion_mnist over real processes: data-parallel training must land on the parameters
// of single-process training on the same global batch, and bad setups must fail clearly on
// every rank. Needs Debian's dataset-fashion-mnist (scripts/install-deps installs it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device/device.h"
#include "hoop/train.h"
#include "tests/launch/hooprun_harness.h"
#include "tests/train/train_run_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::HasSubstr;

class TrainingRunTest : public TrainingDataTest {
 protected:
  // Rank 0's final parameters after 1 rank with `common` + `one`, then 2 ranks with
  // `common` + `two`.
  std::pair<Params, Params> one_and_two_ranks(const std::vector<std::string>& common,
                                              std::vector<std::string> one,
                                              std::vector<std::string> two) {
    one.insert(one.begin(), common.begin(), common.end());
    two.insert(two.begin(), common.begin(), common.end());
    return {train_run(1, one, dir_, "one"), train_run(2, two, dir_, "two")};
  }
};

TEST_F(TrainingRunTest, TwoRanksLandOnTheParametersOfOneRankWithTheGlobalBatch) {
  const auto [one, two] = one_and_two_ranks({"--model", "mlp", "--max-steps", "20", "--lr", "0.05"},
                                            {"--batch-size", "32"}, {"--batch-size", "16"});
  expect_close(two, one, 1e-5, 1e-4);
}

TEST_F(TrainingRunTest, ConvolutionalModelAgreesToo) {
  const auto [one, two] = one_and_two_ranks({"--model", "lenet5", "--max-steps", "6"},
                                            {"--batch-size", "16"}, {"--batch-size", "8"});
  expect_close(two, one, 1e-5, 1e-4);
}

TEST_F(TrainingRunTest, BackwardPassesPerStepAverageLikeOneLargerBatch) {
  // Two ranks x two micro-batches of 8 per update see the same 32 examples as one rank with a
  // batch of 32; 20 micro-batches make 10 updates.
  const auto [one, two] = one_and_two_ranks(
      {"--model", "mlp", "--optimizer", "adam", "--lr", "0.001"},
      {"--max-steps", "10", "--batch-size", "32"},
      {"--max-steps", "20", "--batch-size", "8", "--backward-passes-per-step", "2"});
  expect_close(two, one, 1e-5, 1e-3);
}

TEST_F(TrainingRunTest, Fp16CompressionStaysCloseToFullPrecision) {
  const auto [one, two] =
      one_and_two_ranks({"--model", "mlp", "--max-steps", "20"}, {"--batch-size", "32"},
                        {"--batch-size", "16", "--fp16-allreduce"});
  // f16 keeps 11 significant bits: each averaged gradient is off by up to ~5e-4 relative.
  expect_close(two, one, 1e-3, 1e-2);
}

// The number before " samples/s" on the first line of `out` that contains `marker`.
std::string samples_per_second(const std::string& out, const std::string& marker) {
  const std::size_t at = out.find(marker);
  if (at == std::string::npos) return "no line with '" + marker + "'";
  const std::size_t end = out.find(" samples/s", at);
  const std::size_t eol = out.find('\n', at);
  if (end == std::string::npos || end > eol) return "no samples/s after '" + marker + "'";
  const std::size_t begin = out.find_last_of(' ', end - 1) + 1;
  return out.substr(begin, end - begin);
}

TEST_F(TrainingRunTest, PrintsEpochLinesAndTheSeedStudysMetrics) {
  const RunResult r = run_hooprun(
      {"-np", "2", HOOP_TRAIN_BIN, "--model", "mlp", "--max-steps", "40", "--baseline-steps", "5"},
      {}, std::chrono::seconds(240));
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("epoch 1/1: train loss"));
  EXPECT_THAT(r.out, HasSubstr("test accuracy"));
  for (const char* metric :
       {"throughput_n", "throughput_1", "speedup_n", "scaling efficiency", "time split",
        "waiting for gradients", "memory (rank 0)", "activations"})
    EXPECT_THAT(r.out, HasSubstr(metric));
  EXPECT_THAT(r.err, HasSubstr("epoch 1/1 ["));  // the progress bar
  // One epoch: the epoch line and the summary time the same loop (the slowest rank's), so
  // they give the same samples/s.
  EXPECT_EQ(samples_per_second(r.out, "epoch 1/1: "), samples_per_second(r.out, "throughput_n"))
      << r.out;
}

TEST(TrainingRunHelp, ShowsEveryOptionsDefault) {
  const RunResult r = run_hooprun({"-np", "1", HOOP_TRAIN_BIN, "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* shown :
       {"--epochs INT:POSITIVE=1", "--batch-size INT:POSITIVE=64", "--lr FLOAT:POSITIVE=0.02",
        "--seed UINT=42", "--save-params", "--progress TEXT:{auto,off}=auto"})
    EXPECT_THAT(r.out, HasSubstr(shown));
}

TEST(TrainingRunErrors, MissingDataFailsEveryRankNamingTheFile) {
  const RunResult r = run_hooprun({"-np", "2", HOOP_TRAIN_BIN, "--data-dir", "/nonexistent/fm"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0);
  for (const char* rank : {"[0] ", "[1] "})
    EXPECT_THAT(r.err, HasSubstr(std::string(rank) + "train_fashion_mnist: "));
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/fm/train-images-idx3-ubyte"));
}

TEST(TrainingRunErrors, CudaWithoutAUsableDeviceIsAClearError) {
  if (device::device_count() > 0) GTEST_SKIP() << "a CUDA device is usable here";
  const RunResult r = run_hooprun({"-np", "1", HOOP_TRAIN_BIN, "--device", "cuda"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("device \"cuda\": no usable CUDA device"));
  EXPECT_THAT(r.err, HasSubstr(device::unavailable_reason()));
}

TEST(TrainingRunErrors, AnUnknownDeviceIsAClearError) {
  const RunResult r = run_hooprun({"-np", "1", HOOP_TRAIN_BIN, "--device", "tpu"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("device \"tpu\": expected cpu, cuda or cuda:N"));
}

// Labelled gpu: skips where no CUDA device is usable.
class TrainingRunGpuTest : public TrainingRunTest {
 protected:
  void SetUp() override {
    if (device::device_count() == 0) {
      GTEST_SKIP() << "no usable CUDA device: " << device::unavailable_reason();
    }
    TrainingRunTest::SetUp();
  }
};

TEST_F(TrainingRunGpuTest, OneRankOnCudaEndsNearTheCpuRun) {
  for (const char* model : {"mlp", "lenet5"}) {
    const std::vector<std::string> common{"--model", model,          "--max-steps",
                                          "10",      "--batch-size", "32"};
    std::vector<std::string> cuda = common;
    cuda.insert(cuda.end(), {"--device", "cuda"});
    const Params cpu = train_run(1, common, dir_, std::string(model) + "_cpu");
    const Params gpu = train_run(1, cuda, dir_, std::string(model) + "_cuda");
    // cuBLAS and OpenBLAS sum in different orders; ten updates keep that within 1e-3.
    expect_close(gpu, cpu, 1e-3, 1e-2);
  }
}

TEST(TrainingRunErrors, BadFlagsAreRefusedBeforeAnyWork) {
  const RunResult r = run_hooprun({"-np", "1", HOOP_TRAIN_BIN, "--model", "resnet"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--model"));
}

}  // namespace
}  // namespace hoop::launch::testing
