// The UCX transport against dying processes (real processes, fork), over UCX's TCP and its
// shared-memory transport: a rank killed mid-transfer fails every other rank naming it within
// the bound, and an orderly exit is no crash.
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

#include "tests/transports/tcp_test_util.h"
#include "transports/ucx/ucx_transport.h"

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

struct Child {
  pid_t pid = -1;
  int out = -1;
};

[[noreturn]] void report(int out, const std::string& line) {
  const std::string l = line + "\n";
  (void)!::write(out, l.data(), l.size());
  ::_exit(0);
}

[[noreturn]] void report_status(int out, const Status& s) {
  report(out, fmt::format("E {} {}", static_cast<int>(s.code()), s.message()));
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

// The store runs in a child process, so that this process stays single-threaded and can fork
// ranks safely. The parameter is UCX_TLS.
class UcxProcessTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ::setenv("UCX_TLS", GetParam(), 1);
    store_port_ = start_store_process(store_pid_);
    ASSERT_GT(store_pid_, 0);
    ASSERT_NE(store_port_, 0);
  }
  void TearDown() override {
    for (Child& c : children_) {
      ::kill(c.pid, SIGKILL);
      ::kill(c.pid, SIGCONT);  // a stopped child dies of the SIGKILL once it runs again
      ::waitpid(c.pid, nullptr, 0);
      ::close(c.out);
    }
    ::kill(store_pid_, SIGKILL);
    ::waitpid(store_pid_, nullptr, 0);
    ::unsetenv("UCX_TLS");
  }

  // Connects `rank` of `size` to every other rank; reports and exits on failure.
  std::unique_ptr<Transport> join(int rank, int size, int out) {
    auto store = Store::connect("127.0.0.1", store_port_, test_store_options(), rank);
    if (!store.ok()) report_status(out, store.status());
    std::vector<int> peers;
    for (int r = 0; r < size; ++r)
      if (r != rank) peers.push_back(r);
    ucx::UcxOptions o;
    o.connect_timeout = milliseconds{20000};
    auto t = ucx::connect(**store, rank, size, peers, "ucx-fault-job", o);
    if (!t.ok()) report_status(out, t.status());
    return std::move(t).value();
  }

  void start(int size, const std::function<void(int rank, int out)>& body) {
    for (int r = 0; r < size; ++r) {
      int fds[2];
      ASSERT_EQ(::pipe(fds), 0);
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(fds[0]);
        body(r, fds[1]);
        ::_exit(0);
      }
      ::close(fds[1]);
      children_.push_back({pid, fds[0]});
    }
  }

  bool all_ready() {
    bool ok = true;
    for (std::size_t r = 0; r < children_.size(); ++r) {
      const std::string line = read_line(children_[r], test_deadline());
      EXPECT_EQ(line, "R") << "rank " << r;
      ok = ok && line == "R";
    }
    return ok;
  }

  std::uint16_t store_port_ = 0;
  pid_t store_pid_ = -1;
  std::vector<Child> children_;
};

TEST_P(UcxProcessTest, RankKilledMidTransferFailsEveryOtherRankNamingIt) {
  constexpr int kRanks = 3;
  constexpr int kVictim = 2;
  start(kRanks, [&](int rank, int out) {
    auto t = join(rank, kRanks, out);
    // 1 MiB messages take UCX's rendezvous protocol, so the kill lands amid transfers.
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
}

// A stopped rank neither exits nor breaks its endpoints: only deadlines notice it, and the
// first rank to time out may be one waiting on a live rank that itself waits on the stopped
// one. Here that is forced: each "collective" is a ring of steps under one deadline (as with
// HOOP_TIMEOUT_SECONDS=3), and rank 0, across the ring from the victim, has a deadline a second
// shorter (as if it entered the collective first), so it times out waiting for rank 3. Every
// survivor must still name the stopped rank 2.
TEST_P(UcxProcessTest, StoppedRankIsNamedByEverySurvivor) {
  constexpr int kRanks = 4;
  constexpr int kVictim = 2;
  start(kRanks, [&](int rank, int out) {
    auto t = join(rank, kRanks, out);
    const int right = (rank + 1) % kRanks;
    const int left = (rank + kRanks - 1) % kRanks;
    // 256 KiB takes UCX's rendezvous protocol: a send completes only once its receiver has it.
    std::vector<char> outgoing(256 << 10, 'x'), incoming(256 << 10);
    for (long iter = 0;; ++iter) {
      if (iter == 20) (void)!::write(out, "R\n", 2);
      const Deadline deadline = Clock::now() + milliseconds{rank == 0 ? 2000 : 3000};
      for (int step = 0; step < kRanks - 1; ++step) {
        auto r = t->recv(left, incoming.data(), incoming.size());
        auto s = t->send(right, outgoing.data(), outgoing.size());
        Status st = r.ok() ? s.status() : r.status();
        if (st.ok()) {
          const RequestId ids[] = {*r, *s};
          st = t->wait(ids, deadline);
        }
        if (!st.ok()) {
          t->abort(st);  // what a collective layer does with its first failure
          report_status(out, st);
        }
      }
    }
  });
  ASSERT_TRUE(all_ready());
  ASSERT_EQ(::kill(children_[kVictim].pid, SIGSTOP), 0);
  const auto stopped_at = Clock::now();
  const Deadline bound = stopped_at + std::chrono::seconds{15};
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    const std::string line = read_line(children_[r], bound);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - stopped_at).count();
    ASSERT_FALSE(line.empty()) << "rank " << r << " reported nothing within 15 s";
    EXPECT_NE(line.find("rank 2"), std::string::npos) << "rank " << r << ": " << line;
    EXPECT_EQ(std::atoi(line.c_str() + 2), static_cast<int>(StatusCode::kTimeout))
        << "rank " << r << ": " << line;
    std::printf("[ info ] rank %d reported after %.0f ms (not asserted): %s\n", r, ms,
                line.c_str());
  }
}

TEST_P(UcxProcessTest, OrderlyExitIsNoCrash) {
  start(2, [&](int rank, int out) {
    auto t = join(rank, 2, out);
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

INSTANTIATE_TEST_SUITE_P(Tls, UcxProcessTest, ::testing::Values("tcp", "posix"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace
}  // namespace hoop::testing
