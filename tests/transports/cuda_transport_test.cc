// The CUDA IPC transport: its slicing and ring arithmetic and its argument checks, which run
// anywhere; and, labelled gpu, the shared conformance bodies and a killed peer over real
// processes on one device (cuda_check.cc), which skip where no CUDA device is usable.
#include "transports/cuda/cuda_transport.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "device/device.h"
#include "tests/transports/tcp_test_util.h"
#include "transports/cuda/cuda_conn.h"
#include "transports/cuda/cuda_framing.h"
#include "transports/shm/shm_transport.h"

namespace hoop::testing {
namespace {

using cuda::SliceRecord;

TEST(CudaFraming, MessagesTravelInSlicesAndEmptyOnesInOne) {
  EXPECT_EQ(cuda::slice_count(0, 4096), 1u);
  EXPECT_EQ(cuda::slice_count(1, 4096), 1u);
  EXPECT_EQ(cuda::slice_count(4096, 4096), 1u);
  EXPECT_EQ(cuda::slice_count(4097, 4096), 2u);
  EXPECT_EQ(cuda::slice_length(4097, 0, 4096), 4096u);
  EXPECT_EQ(cuda::slice_length(4097, 4096, 4096), 1u);
  EXPECT_EQ(cuda::slice_length(0, 0, 4096), 0u);
  // The slices of a message cover it exactly once.
  for (const std::uint64_t bytes : {0ull, 1ull, 4095ull, 4096ull, 12289ull}) {
    std::uint64_t covered = 0;
    for (std::uint64_t k = 0; k < cuda::slice_count(bytes, 4096); ++k)
      covered += cuda::slice_length(bytes, k * 4096, 4096);
    EXPECT_EQ(covered, bytes);
  }
}

TEST(CudaFraming, SlotsWrapAndAreFreeOnlyOnceReleased) {
  EXPECT_EQ(cuda::slot_of(0, 4), 0u);
  EXPECT_EQ(cuda::slot_of(5, 4), 1u);
  EXPECT_TRUE(cuda::slot_free(3, 0, 4));
  EXPECT_FALSE(cuda::slot_free(4, 0, 4));  // slot 0 still holds record 0
  EXPECT_TRUE(cuda::slot_free(4, 1, 4));
  EXPECT_EQ(cuda::slot_offset(0, 0, 4, 4096), 0u);
  EXPECT_EQ(cuda::slot_offset(0, 3, 4, 4096), 3u * 4096);
  EXPECT_EQ(cuda::slot_offset(2, 1, 4, 4096), 9u * 4096);  // the third sender's ring
}

TEST(CudaFraming, OnlyTheNextSliceOfTheStreamIsAccepted) {
  EXPECT_TRUE(cuda::record_follows(SliceRecord{0, 0}, false, 0, 0));
  EXPECT_TRUE(cuda::record_follows(SliceRecord{9000, 0}, false, 0, 0));
  EXPECT_FALSE(cuda::record_follows(SliceRecord{9000, 4096}, false, 0, 0));
  EXPECT_FALSE(cuda::record_follows(SliceRecord{cuda::kMaxMessageBytes + 1, 0}, false, 0, 0));
  EXPECT_TRUE(cuda::record_follows(SliceRecord{9000, 4096}, true, 9000, 4096));
  EXPECT_FALSE(cuda::record_follows(SliceRecord{9000, 8192}, true, 9000, 4096));
  EXPECT_FALSE(cuda::record_follows(SliceRecord{9001, 4096}, true, 9000, 4096));
}

TEST(CudaArguments, HostBuffersAreRefusedNamingTheOperand) {
  std::vector<char> host(16);
  const Status s = cuda::check_device_buffer(host.data(), host.size(), "send buffer");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("send buffer"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("host memory"), std::string::npos) << s.message();
  const Status null = cuda::check_device_buffer(nullptr, 4, "receive buffer");
  EXPECT_EQ(null.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(null.message().find("receive buffer"), std::string::npos) << null.message();
  EXPECT_TRUE(cuda::check_device_buffer(nullptr, 0, "receive buffer").ok());
}

class CudaConnect : public TcpTest {};

TEST_F(CudaConnect, BadOptionsAndNoDeviceAreInvalidArguments) {
  auto store = this->store(0);
  ASSERT_NE(store, nullptr);
  const std::vector<int> peers = {1};
  cuda::CudaOptions odd;
  odd.slice_bytes = 1000;
  const Status s = cuda::connect(*store, 0, 2, peers, "job", 0, odd).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("4096"), std::string::npos) << s.message();
  const std::vector<int> self = {0};
  EXPECT_EQ(cuda::connect(*store, 0, 2, self, "job", 0, {}).status().code(),
            StatusCode::kInvalidArgument);
  if (device::device_count() > 0) return;
  const Status none = cuda::connect(*store, 0, 2, peers, "job", 0, {}).status();
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find(device::unavailable_reason()), std::string::npos) << none.message();
}

struct Job {
  const char* name;
  const char* filter;
  int ranks;
  int cases;
};
void PrintTo(const Job& j, std::ostream* os) { *os << j.name; }

/// Runs `ranks` processes of cuda_check with `filter`, each bounded by `timeout`; the output
/// of all of them, each line of a rank's summary prefixed "rank <r> exit <code>".
std::string run_cuda_ranks(int ranks, const std::string& filter, std::uint16_t port,
                           const std::string& job) {
  std::string cmd;
  for (int r = 0; r < ranks; ++r) {
    cmd += fmt::format(
        "(HOOP_CUDA_CHECK_RANK={} HOOP_CUDA_CHECK_SIZE={} HOOP_CUDA_CHECK_PORT={} "
        "HOOP_CUDA_CHECK_JOB={} timeout -k 5 120 '{}' --gtest_color=no '--gtest_filter={}' 2>&1; "
        "echo \"rank {} exit $?\") & ",
        r, ranks, port, job, HOOP_CUDA_CHECK_BIN, filter, r);
  }
  cmd += "wait";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  ::pclose(p);
  return out;
}

class CudaGpuTest : public ::testing::TestWithParam<Job> {
 protected:
  void SetUp() override {
    // The store runs in a child forked before this process touches CUDA.
    port_ = start_store_process(store_pid_);
    ASSERT_NE(port_, 0);
  }
  void TearDown() override {
    ::kill(store_pid_, SIGKILL);
    ::waitpid(store_pid_, nullptr, 0);
  }
  pid_t store_pid_ = -1;
  std::uint16_t port_ = 0;
};

TEST_P(CudaGpuTest, PassesOnEveryRank) {
  if (device::device_count() == 0) GTEST_SKIP() << device::unavailable_reason();
  const Job job = GetParam();
  const std::string id = fmt::format("cudatest{}x{}", ::getpid(), job.name);
  const std::string out = run_cuda_ranks(job.ranks, job.filter, port_, id);
  shm::remove_job_segments(id);
  const bool killed = std::string(job.name) == "KilledPeer";
  for (int r = 0; r < job.ranks; ++r) {
    // The killed rank (2) dies by SIGKILL: timeout reports 128 + 9.
    const int expected = killed && r == 2 ? 137 : 0;
    EXPECT_NE(out.find(fmt::format("rank {} exit {}\n", r, expected)), std::string::npos) << out;
  }
  const std::string passed =
      fmt::format("[  PASSED  ] {} {}.", job.cases, job.cases == 1 ? "test" : "tests");
  int count = 0;
  for (std::size_t at = 0; (at = out.find(passed, at)) != std::string::npos; ++at) ++count;
  EXPECT_EQ(count, killed ? 2 : job.ranks) << out;
}

// Two ranks on one device: every body but the 3-rank ones; 3 ranks: order across every pair,
// abort propagation and a killed peer.
INSTANTIATE_TEST_SUITE_P(
    Bodies, CudaGpuTest,
    ::testing::Values(Job{"TwoRankBodies",
                          "CudaRank.*:-CudaRank.AbortCarries*:CudaRank.KilledPeer*", 2, 9},
                      Job{"AllPairsKeepOrder3Ranks", "CudaRank.AllPairs*", 3, 1},
                      Job{"AbortCarriesTheCause", "CudaRank.AbortCarries*", 3, 1},
                      Job{"KilledPeer", "CudaRank.KilledPeer*", 3, 1}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace hoop::testing
