// The shared-memory transport against dying processes (real processes, fork): a rank killed
// mid-transfer or while its peers sleep on the doorbell, an orderly exit that is no crash, and
// a rank killed during set-up, whose segment remove_job_segments sweeps.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tests/transports/shm_test_util.h"

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

// One forked rank and the read end of the pipe it reports on.
struct Child {
  pid_t pid = -1;
  int out = -1;
};

// A child's context: the store to join and the job.
struct Job {
  std::uint16_t store_port = 0;
  std::string id;
  int size = 0;
};

[[noreturn]] void report(int out, const std::string& line) {
  const std::string l = line + "\n";
  (void)!::write(out, l.data(), l.size());
  ::_exit(0);
}

[[noreturn]] void report_status(int out, const Status& s) {
  report(out, fmt::format("E {} {}", static_cast<int>(s.code()), s.message()));
}

// Connects `rank` of `job` to every other rank; reports and exits on failure.
std::unique_ptr<Transport> join(const Job& job, int rank, int out, shm::ShmOptions o) {
  auto store = Store::connect("127.0.0.1", job.store_port, test_store_options(), rank);
  if (!store.ok()) report_status(out, store.status());
  auto t = shm::connect(**store, rank, job.size, other_ranks(rank, job.size), job.id, o);
  if (!t.ok()) report_status(out, t.status());
  return std::move(t).value();
}

Child spawn(const std::function<void(int out)>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    body(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

// One line from `c`, or "" when none came before `deadline` (or the pipe closed).
std::string read_line(const Child& c, Deadline deadline) {
  std::string line;
  char ch;
  while (Clock::now() < deadline) {
    pollfd p{c.out, POLLIN, 0};
    const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left, 0))) <= 0) continue;
    if (::read(c.out, &ch, 1) != 1) break;
    if (ch == '\n') return line;
    line.push_back(ch);
  }
  return line;
}

// A fixture whose store runs in a child process, so that this process stays single-threaded
// and can fork ranks safely.
class ShmProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.id = unique_shm_job_id();
    job_.store_port = start_store_process(store_pid_);
    ASSERT_GT(store_pid_, 0);
    ASSERT_NE(job_.store_port, 0);
  }
  void TearDown() override {
    for (Child& c : children_) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
      ::close(c.out);
    }
    ::kill(store_pid_, SIGKILL);
    ::waitpid(store_pid_, nullptr, 0);
    shm::remove_job_segments(job_.id);
  }

  void start(int size, const std::function<void(int rank, int out)>& body) {
    job_.size = size;
    for (int r = 0; r < size; ++r) children_.push_back(spawn([&, r](int out) { body(r, out); }));
  }

  // Waits for "R" from every rank; false (and a failure) otherwise.
  bool all_ready() {
    bool ok = true;
    for (std::size_t r = 0; r < children_.size(); ++r) {
      const std::string line = read_line(children_[r], test_deadline());
      EXPECT_EQ(line, "R") << "rank " << r;
      ok = ok && line == "R";
    }
    return ok;
  }

  Job job_;
  pid_t store_pid_ = -1;
  std::vector<Child> children_;
};

TEST_F(ShmProcessTest, RankKilledMidTransferFailsEveryOtherRankNamingIt) {
  constexpr int kRanks = 4;
  constexpr int kVictim = 2;
  start(kRanks, [&](int rank, int out) {
    // Messages four times the ring, so that the kill lands in the middle of transfers.
    auto t = join(job_, rank, out, shm_test_options(256 << 10));
    std::vector<std::vector<char>> outs(kRanks, std::vector<char>(1 << 20, 'x'));
    std::vector<std::vector<char>> ins(kRanks, std::vector<char>(1 << 20));
    for (long iter = 0;; ++iter) {
      if (iter == 20) (void)!::write(out, "R\n", 2);
      std::vector<RequestId> ids;
      Status s;
      for (int p = 0; p < kRanks && s.ok(); ++p) {
        if (p == rank) continue;
        auto a = t->send(p, outs[p].data(), outs[p].size());
        auto b = t->recv(p, ins[p].data(), ins[p].size());
        if (a.ok()) ids.push_back(*a);
        if (b.ok()) ids.push_back(*b);
        s = a.ok() ? b.status() : a.status();
      }
      const Status waited = t->wait(ids, Clock::now() + milliseconds{20000});
      if (s.ok()) s = waited;
      if (!s.ok()) {
        t->abort(s);  // what a collective layer does with its first failure
        report_status(out, s);
      }
    }
  });
  ASSERT_TRUE(all_ready());
  ASSERT_EQ(::kill(children_[kVictim].pid, SIGKILL), 0);
  const auto killed_at = Clock::now();
  const Deadline bound = killed_at + std::chrono::seconds{15};
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    const std::string line = read_line(children_[r], bound);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - killed_at).count();
    ASSERT_FALSE(line.empty()) << "rank " << r << " reported nothing within 15 s";
    EXPECT_NE(line.find("rank 2"), std::string::npos) << "rank " << r << ": " << line;
    EXPECT_EQ(std::atoi(line.c_str() + 2), static_cast<int>(StatusCode::kPeerLost))
        << "rank " << r << ": " << line;
    std::printf("[ info ] rank %d reported after %.0f ms (not asserted): %s\n", r, ms,
                line.c_str());
  }
  EXPECT_TRUE(job_segments(job_.id).empty());
}

TEST_F(ShmProcessTest, RankKilledWhileItsPeerSleepsFailsItNamingRankAndPid) {
  start(2, [&](int rank, int out) {
    auto t = join(job_, rank, out, shm_test_options());
    if (rank == 0) {
      (void)!::write(out, "R\n", 2);
      while (true) ::pause();
    }
    int v = 0;
    auto id = t->recv(0, &v, sizeof v);
    (void)!::write(out, "R\n", 2);
    report_status(out,
                  id.ok() ? wait_one(*t, *id, Clock::now() + milliseconds{60000}) : id.status());
  });
  ASSERT_TRUE(all_ready());
  std::this_thread::sleep_for(milliseconds{100});  // let rank 1 fall asleep on its doorbell
  ASSERT_EQ(::kill(children_[0].pid, SIGKILL), 0);
  const std::string line = read_line(children_[1], test_deadline());
  EXPECT_EQ(std::atoi(line.c_str() + 2), static_cast<int>(StatusCode::kPeerLost)) << line;
  EXPECT_NE(line.find("rank 0"), std::string::npos) << line;
  EXPECT_NE(line.find(fmt::format("pid {}", children_[0].pid)), std::string::npos) << line;
}

TEST_F(ShmProcessTest, OrderlyExitIsNoCrash) {
  start(2, [&](int rank, int out) {
    auto t = join(job_, rank, out, shm_test_options());
    int v = rank == 0 ? 77 : 0;
    auto id = rank == 0 ? t->send(1, &v, sizeof v) : t->recv(0, &v, sizeof v);
    if (!id.ok()) report_status(out, id.status());
    const Status s = wait_one(*t, *id, test_deadline());
    if (!s.ok() || v != 77) report_status(out, s.ok() ? internal_error("wrong value") : s);
    if (rank == 0) {
      t.reset();  // the goodbye
      report(out, "R");
    }
    (void)!::write(out, "R\n", 2);
    auto again = t->recv(0, &v, sizeof v);
    report_status(out, again.ok() ? wait_one(*t, *again, test_deadline()) : again.status());
  });
  ASSERT_TRUE(all_ready());
  const std::string line = read_line(children_[1], test_deadline());
  EXPECT_EQ(std::atoi(line.c_str() + 2), static_cast<int>(StatusCode::kPeerLost)) << line;
  EXPECT_NE(line.find("rank 0 shut its transport down"), std::string::npos) << line;
}

TEST_F(ShmProcessTest, RankKilledDuringSetUpLeavesASegmentThatRemoveJobSegmentsSweeps) {
  // Rank 0 waits for a rank 1 that never comes, with its segment still named.
  start(1, [&](int, int out) {
    job_.size = 2;
    shm::ShmOptions o = shm_test_options();
    o.connect_timeout = milliseconds{60000};
    join(job_, 0, out, o);
    report(out, "connected without its peer");
  });
  const Deadline deadline = test_deadline();
  while (job_segments(job_.id).empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds{10});
  }
  ASSERT_EQ(job_segments(job_.id).size(), 1u);
  ASSERT_EQ(::kill(children_[0].pid, SIGKILL), 0);
  ::waitpid(children_[0].pid, nullptr, 0);
  EXPECT_EQ(job_segments(job_.id).size(), 1u);
  EXPECT_EQ(shm::remove_job_segments(job_.id), 1);
  EXPECT_TRUE(job_segments(job_.id).empty());
}

}  // namespace
}  // namespace hoop::testing
