// Collectives on CUDA device buffers over real processes: hooprun launches comm_device_check
// ranks (see comm_device_check.cc) with each HOOP_GPU_BACKEND. The GPU cases skip, naming the
// reason, where no CUDA device is usable; the last case runs exactly there.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/algorithms/device_path.h"
#include "device/device.h"
#include "tests/launch/hooprun_harness.h"

namespace hoop {
namespace {

using launch::testing::count_lines_with;
using launch::testing::RunResult;

/// Bounds a broken run; never a speed check.
constexpr std::chrono::seconds kDeadline{300};

/// hoop's jobs send every call over CUDA IPC (no size is staged), the route under test.
RunResult run_device_ranks(int n, const std::string& backend) {
  std::vector<std::string> env = {"HOOP_GPU_BACKEND=" + backend};
  if (backend == "hoop") env.push_back("HOOP_CUDA_IPC_MIN_BYTES=0");
  return launch::testing::run_ranks(HOOP_COMM_DEVICE_CHECK_BIN, n, {}, env, kDeadline);
}

struct DeviceJob {
  int ranks;
  const char* backend;
};
void PrintTo(const DeviceJob& j, std::ostream* os) {
  *os << j.ranks << " ranks, HOOP_GPU_BACKEND=" << j.backend;
}

class CommDevice : public ::testing::TestWithParam<DeviceJob> {};

// 2-4 ranks share one GPU through CUDA IPC and hoop's algorithms (HOOP_GPU_BACKEND=hoop), or
// each use NCCL (a 1-rank job: NCCL refuses two ranks on one GPU); auto picks for itself;
// staging goes through pinned host memory. On the fake device (HOOP_FAKE_DEVICE) all of it
// but NCCL runs in CI.
TEST_P(CommDevice, EveryCollectiveMatchesTheHostResult) {
  if (device::device_count() == 0) GTEST_SKIP() << device::unavailable_reason();
  const DeviceJob job = GetParam();
  if (std::string(job.backend) == "nccl" && !collectives::device_backend_registered("nccl"))
    GTEST_SKIP() << "this build has no NCCL";
  if (std::string(job.backend) == "nccl" && device::fake())
    GTEST_SKIP() << "NCCL needs a real GPU (this is HOOP_FAKE_DEVICE's)";
  const RunResult r = run_device_ranks(job.ranks, job.backend);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, "device checked", "cases"), job.ranks) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Jobs, CommDevice,
                         ::testing::Values(DeviceJob{1, "hoop"}, DeviceJob{2, "hoop"},
                                           DeviceJob{3, "hoop"}, DeviceJob{4, "hoop"},
                                           DeviceJob{1, "nccl"}, DeviceJob{2, "auto"},
                                           DeviceJob{1, "staging"}, DeviceJob{2, "staging"}),
                         [](const auto& p) {
                           return std::to_string(p.param.ranks) + "Ranks_" +
                                  p.param.backend;
                         });

struct MismatchJob {
  int ranks;
  const char* backend;
  const char* field;
  /// The host transport: shm's shared slots carry the fingerprints on one host, tcp's
  /// messages (CallCheck::exchange) elsewhere.
  const char* transport = "shm";
};
void PrintTo(const MismatchJob& j, std::ostream* os) {
  *os << j.ranks << " ranks, HOOP_GPU_BACKEND=" << j.backend << ", rank 1's " << j.field
      << ", HOOP_TRANSPORT=" << j.transport;
}

class CommDeviceMismatch : public ::testing::TestWithParam<MismatchJob> {};

// A device allreduce in which rank 1 passes another op, dtype or kind of memory: the call's
// fingerprint is checked on the host before any device work is enqueued (over CUDA IPC, whose
// messages are device memory and cannot carry it; NCCL's the same way), so every rank fails
// naming the field instead of summing garbage or waiting on its device.
TEST_P(CommDeviceMismatch, EveryRankNamesTheField) {
  if (device::device_count() == 0) GTEST_SKIP() << device::unavailable_reason();
  const MismatchJob job = GetParam();
  if (std::string(job.backend) == "nccl" &&
      (!collectives::device_backend_registered("nccl") || device::device_count() < job.ranks))
    GTEST_SKIP() << "NCCL needs a GPU for each rank";
  std::vector<std::string> env = {std::string("HOOP_GPU_BACKEND=") + job.backend,
                                  "HOOP_CUDA_IPC_MIN_BYTES=0",
                                  std::string("HOOP_TRANSPORT=") + job.transport};
  const RunResult r = launch::testing::run_ranks(HOOP_COMM_DEVICE_CHECK_BIN, job.ranks,
                                                 {"mismatch", job.field}, env, kDeadline);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_lines_with(r.out, ": mismatch: "), job.ranks) << r.out << r.err;
  // Over tcp, a rank on host buffers sends its payload behind its call header, and the lengths
  // differ before the headers are compared: both ranks say that the calls differ.
  const bool lengths = std::string(job.transport) == "tcp" && std::string(job.field) == "buffers";
  const std::string named = lengths ? " differ" : std::string(job.field) + " differs";
  EXPECT_EQ(count_lines_with(r.out, ": mismatch: ", named), job.ranks)
      << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Jobs, CommDeviceMismatch,
                         ::testing::Values(MismatchJob{2, "hoop", "op"},
                                           MismatchJob{3, "hoop", "dtype"},
                                           MismatchJob{3, "hoop", "op", "tcp"},
                                           MismatchJob{2, "hoop", "buffers"},
                                           MismatchJob{2, "hoop", "buffers", "tcp"},
                                           MismatchJob{2, "nccl", "op"}),
                         [](const auto& p) {
                           return std::to_string(p.param.ranks) + "Ranks_" + p.param.backend +
                                  "_" + p.param.field + "_" + p.param.transport;
                         });

// Host buffers stay on the host path: no device, whatever the build.
TEST(CommDeviceBuffers, HostMemoryIsNoDevice) {
  int on_stack = 0;
  std::vector<int> on_heap(4);
  Result<int> where =
      collectives::buffers_device({{&on_stack, "input"}, {on_heap.data(), "output"}, {nullptr, "x"}});
  ASSERT_TRUE(where.ok()) << where.status().to_string();
  EXPECT_EQ(*where, kCpuDevice);
}

// Without a device the check program says why and passes, rather than failing or hanging.
TEST(CommDeviceBuffers, CheckProgramNamesTheReasonWithoutADevice) {
  if (device::device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  const RunResult r = run_device_ranks(1, "auto");
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("device skipped: " + device::unavailable_reason()), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace hoop
