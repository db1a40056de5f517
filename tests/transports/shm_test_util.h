// Shared pieces of the shared-memory transport tests: a job id of their own per test (other
// test runs on the host use /dev/shm too), the segments a job has left, and a runner that gives
// each of N threads its own rank and shm transport.
#pragma once

#include <dirent.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/transports/tcp_test_util.h"
#include "transports/shm/shm_peers.h"
#include "transports/shm/shm_transport.h"

namespace hoop::testing {

/// A job id that no other test, process or run on this host uses.
inline std::string unique_shm_job_id() {
  static std::atomic<int> counter{0};
  return fmt::format("shmtest{}x{}", ::getpid(), counter++);
}

/// The names in /dev/shm that belong to job `job_id`.
inline std::vector<std::string> job_segments(const std::string& job_id) {
  std::vector<std::string> names;
  const std::string prefix = shm::segment_prefix(job_id);
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(dir)) {
      if (std::string_view(e->d_name).starts_with(prefix)) names.emplace_back(e->d_name);
    }
    ::closedir(dir);
  }
  return names;
}

/// Options with a bounded set-up and `ring_bytes` rings; exchanges' sends go by single copy
/// from 8 KiB whatever this system's cross-memory reads cost, so that the tests meet both paths.
inline shm::ShmOptions shm_test_options(std::size_t ring_bytes = std::size_t{4} << 20) {
  shm::ShmOptions o;
  o.ring_bytes = ring_bytes;
  o.read_bytes = shm::kLendFromBytes;
  o.connect_timeout = std::chrono::milliseconds{20000};
  return o;
}

/// Every rank of `size` but `rank`: the peers of a one-host job.
inline std::vector<int> other_ranks(int rank, int size) {
  std::vector<int> peers;
  for (int r = 0; r < size; ++r)
    if (r != rank) peers.push_back(r);
  return peers;
}

/// A fixture with a store server and a job id of its own, whose segments it sweeps at the end.
class ShmTest : public TcpTest {
 protected:
  void SetUp() override {
    TcpTest::SetUp();
    job_id_ = unique_shm_job_id();
  }
  void TearDown() override { shm::remove_job_segments(job_id_); }

  /// Connects rank `rank` of `size` to `peers` (default: every other rank).
  Result<std::unique_ptr<Transport>> connect_shm(int rank, int size, const shm::ShmOptions& o,
                                                 std::vector<int> peers = {}) {
    if (peers.empty()) peers = other_ranks(rank, size);
    auto s = store(rank);
    if (s == nullptr) return internal_error("no store");
    return shm::connect(*s, rank, size, peers, job_id_, o);
  }

  /// Connects two ranks whose options `differ` sets apart (rank 0's, rank 1's) and expects the
  /// set-up to fail; the rank that maps the other's segment first names `variable`, the other may
  /// time out waiting for it.
  void expect_refused_naming(const std::function<void(shm::ShmOptions&, int)>& differ,
                             const std::string& variable) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        shm::ShmOptions o = shm_test_options();
        differ(o, rank);
        o.connect_timeout = std::chrono::milliseconds{5000};
        auto t = connect_shm(rank, 2, o);
        ASSERT_FALSE(t.ok());
        if (t.status().code() == StatusCode::kInvalidArgument) {
          EXPECT_NE(t.status().message().find(variable), std::string::npos) << t.status().message();
        }
      });
    }
    for (auto& th : threads) th.join();
  }

  /// Runs `body` on `size` threads, each with its own connected rank.
  void run_shm_ranks(int size, const shm::ShmOptions& o,
                     const std::function<void(int, Transport&)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        auto t = connect_shm(r, size, o);
        ASSERT_TRUE(t.ok()) << "rank " << r << ": " << t.status().to_string();
        body(r, **t);
      });
    }
    for (auto& t : threads) t.join();
  }

  std::string job_id_;
};

}  // namespace hoop::testing
