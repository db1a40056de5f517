// train_fashion_mnist's parameter-server and key-value-store strategies over real processes:
// the synchronous ones must land on the allreduce strategy's parameters, the asynchronous one
// must learn, and a worker or server that dies must fail every other rank naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "hoop/train.h"
#include "tests/launch/hooprun_harness.h"
#include "tests/train/train_run_harness.h"

namespace hoop::launch::testing {
namespace {

using ::testing::HasSubstr;

class StrategyRunTest : public TrainingDataTest {
 protected:
  // Rank 0's parameters after `workers` workers trained with `strategy` (and `flags`).
  Params run(const std::string& strategy, int workers, std::vector<std::string> flags) {
    const int ranks = train::has_server(train::parse_strategy(strategy)) ? workers + 1 : workers;
    flags.insert(flags.end(), {"--strategy", strategy});
    return train_run(ranks, flags, dir_, strategy + std::to_string(workers));
  }
};

TEST_F(StrategyRunTest, SynchronousServerAndShardsLandOnTheAllreduceParameters) {
  // LeNet-5 on two workers; the MLP on three, where the shards are uneven (235146 parameters)
  // and the server adds three pushes.
  for (const auto& [model, workers] : {std::pair<std::string, int>{"lenet5", 2}, {"mlp", 3}}) {
    const std::vector<std::string> flags{"--model", model, "--max-steps", "8", "--batch-size",
                                         "16"};
    const Params allreduce = run("allreduce", workers, flags);
    expect_close(run("ps", workers, flags), allreduce, 1e-5, 1e-4);
    expect_close(run("kvstore", workers, flags), allreduce, 1e-5, 1e-4);
  }
}

TEST_F(StrategyRunTest, AdamStatesLiveWithTheShardsAndTheServer) {
  const std::vector<std::string> flags{"--model",     "mlp",  "--max-steps", "10",
                                       "--optimizer", "adam", "--lr",        "0.001"};
  const Params allreduce = run("allreduce", 2, flags);
  expect_close(run("ps", 2, flags), allreduce, 1e-5, 1e-3);
  expect_close(run("kvstore", 2, flags), allreduce, 1e-5, 1e-3);
}

// The number before " %" after "test accuracy " in `out`, or -1.
double test_accuracy(const std::string& out) {
  const std::size_t at = out.find("test accuracy ");
  if (at == std::string::npos) return -1;
  return std::atof(out.c_str() + at + std::string("test accuracy ").size());
}

TEST_F(StrategyRunTest, AsynchronousServerLearnsInOneEpochOnTwoWorkers) {
  // The MLP: a whole epoch in a few seconds.
  const RunResult r = run_hooprun({"-np", "3", HOOP_TRAIN_BIN, "--strategy", "ps-async", "--model",
                                   "mlp", "--epochs", "1", "--baseline-steps", "0", "--progress",
                                   "off"},
                                  {}, std::chrono::seconds(400));
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_GE(test_accuracy(r.out), 75.0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("staleness (updates)")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("2 worker(s)")) << r.out;
}

// Starts a long training with `strategy` on `ranks` ranks over `transport`, kills rank `victim`
// once rank 0's progress bar shows training under way, and returns what the job printed. The ranks
// ignore hooprun's SIGTERM, so that what ends them is the error they see, within hooprun's grace.
RunResult kill_during_training(const std::string& strategy, int ranks, int victim,
                               const std::string& transport) {
  const TempDir dir;
  const std::string script = sh_write_pid(dir) +
                             "trap '' TERM; exec '" HOOP_TRAIN_BIN "' --strategy " + strategy +
                             " --model mlp --epochs 100 --max-steps 400 --baseline-steps 0";
  auto job = Hooprun::start(sh_job(ranks, script),
                            {"HOOP_TIMEOUT_SECONDS=30", "HOOP_TRANSPORT=" + transport});
  const std::vector<pid_t> pids = wait_for_rank_pids(dir, ranks);
  EXPECT_TRUE(job->wait_for_output(
      [](const std::string&, const std::string& err) {
        return err.find("epoch 1/100 [") != std::string::npos;
      },
      std::chrono::seconds(120)));
  ::kill(pids.at(static_cast<std::size_t>(victim)), SIGKILL);
  return job->wait(std::chrono::seconds(120));
}

// Every rank but `victim` printed train_fashion_mnist's error naming rank `victim`.
void expect_every_other_rank_names(const RunResult& r, int ranks, int victim) {
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0);
  const std::string named = "rank " + std::to_string(victim);
  for (int rank = 0; rank < ranks; ++rank) {
    if (rank == victim) continue;
    const std::string prefix = "[" + std::to_string(rank) + "] train_fashion_mnist: ";
    EXPECT_GE(count_lines_with(r.err, prefix, named), 1) << "rank " << rank << ":\n" << r.err;
  }
}

TEST_F(StrategyRunTest, AWorkerThatDiesFailsTheServerAndTheOtherWorkersNamingIt) {
  for (const char* strategy : {"ps", "ps-async"}) {
    for (const char* transport : {"shm", "tcp"}) {
      SCOPED_TRACE(std::string(strategy) + " over " + transport);
      expect_every_other_rank_names(kill_during_training(strategy, 4, 1, transport), 4, 1);
    }
  }
}

TEST_F(StrategyRunTest, AServerThatDiesFailsEveryWorkerNamingIt) {
  for (const char* strategy : {"ps", "ps-async"}) {
    for (const char* transport : {"shm", "tcp"}) {
      SCOPED_TRACE(std::string(strategy) + " over " + transport);
      expect_every_other_rank_names(kill_during_training(strategy, 3, 2, transport), 3, 2);
    }
  }
}

TEST_F(StrategyRunTest, AShardOwnerThatDiesFailsTheOtherWorkersNamingIt) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    expect_every_other_rank_names(kill_during_training("kvstore", 3, 0, transport), 3, 0);
  }
}

TEST(StrategyRunErrors, AServerWithoutWorkersIsAClearError) {
  const RunResult r = run_hooprun({"-np", "1", HOOP_TRAIN_BIN, "--strategy", "ps"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("ps needs a server and at least one worker: launch workers + 1"));
}

TEST(StrategyRunErrors, OptionsOnlyAllreduceHasAreRefused) {
  const RunResult r = run_hooprun(
      {"-np", "1", HOOP_TRAIN_BIN, "--strategy", "kvstore", "--backward-passes-per-step", "2"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("need --strategy allreduce"));
}

TEST(StrategyRunErrors, AnUnknownStrategyIsRefused) {
  const RunResult r = run_hooprun({"-np", "1", HOOP_TRAIN_BIN, "--strategy", "gossip"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--strategy"));
}

}  // namespace
}  // namespace hoop::launch::testing
