// The runtime on CUDA device tensors over real processes: hooprun launches runtime_device_check
// ranks (see there); the GPU cases carry the ctest label `gpu` and skip without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device/device.h"
#include "tests/launch/hooprun_harness.h"

namespace hoop {
namespace {

using launch::testing::count_lines_with;
using launch::testing::RunResult;

/// Bounds a broken run; never a speed check.
constexpr std::chrono::seconds kDeadline{120};

void expect_ok(int n, const std::string& scenario, const std::vector<std::string>& env = {}) {
  const RunResult r =
      launch::testing::run_ranks(HOOP_RUNTIME_DEVICE_CHECK_BIN, n, {scenario}, env, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "ok " + scenario), n) << r.out << r.err;
}

// Runs everywhere: without a device a device tensor is refused naming the tensor and the reason;
// with one, a host buffer that claims to be on it is refused.
TEST(RuntimeDeviceTensors, ImpossibleDeviceTensorsAreRefusedAtSubmission) {
  expect_ok(2, "refused");
}

struct Job {
  int ranks;
  const char* backend;
};

void PrintTo(const Job& job, std::ostream* os) {
  *os << job.ranks << " ranks, HOOP_GPU_BACKEND=" << job.backend;
}

class RuntimeDeviceGpu : public ::testing::TestWithParam<Job> {};

// Two to four ranks share the one GPU through hoop's ring over CUDA IPC; one rank also runs
// through NCCL (which refuses two ranks on one GPU).
TEST_P(RuntimeDeviceGpu, EveryCollectiveOnDeviceTensorsMatchesTheHost) {
  if (device::device_count() == 0) GTEST_SKIP() << device::unavailable_reason();
  if (std::string(GetParam().backend) == "nccl" && device::fake())
    GTEST_SKIP() << "NCCL needs a real GPU (this is HOOP_FAKE_DEVICE's)";
  // Every call over CUDA IPC where hoop is asked for (no size is staged): the route under test.
  expect_ok(GetParam().ranks, "collectives",
            {std::string("HOOP_GPU_BACKEND=") + GetParam().backend, "HOOP_CUDA_IPC_MIN_BYTES=0"});
}

INSTANTIATE_TEST_SUITE_P(Jobs, RuntimeDeviceGpu,
                         ::testing::Values(Job{1, "nccl"}, Job{2, "hoop"}, Job{4, "hoop"}),
                         [](const auto& job) {
                           return std::to_string(job.param.ranks) + "Ranks_" + job.param.backend;
                         });

}  // namespace
}  // namespace hoop
