// Every transport against dying and stopped processes (real processes, fork), one suite
// parameterised over the transports as the conformance bodies are: a rank killed amid
// transfers fails every other rank naming it within the bound, a rank killed while its peer
// sleeps wakes that peer with an error naming it, and an orderly exit is no crash. Where a
// transport names the peers that never answered a timeout (UCX), a stopped rank is named by
// every survivor. What is one transport's own (the TCP listener, the shared-memory segments
// of a set-up that died) stays in its own file.
//
// Not here: MPI (its ranks need mpirun; mpi_transport_test runs the abort body under it) and
// CUDA IPC (its ranks need a GPU; cuda_transport_test).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/transports/process_ranks.h"
#include "tests/transports/shm_test_util.h"
#include "tests/transports/tcp_test_util.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#ifdef HOOP_TEST_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

enum class Kind { kTcp, kShm, kUcx };

struct FaultTransport {
  const char* name;
  Kind kind;
  const char* ucx_tls = nullptr;  // UCX_TLS for kUcx
  // A killed peer's error names its pid: the transport watches peer processes (pidfds).
  bool names_pid = false;
  // A survivor may hear of a death as a peer's forwarded abort before its own socket fails.
  bool abort_may_come_first = false;
};

std::ostream& operator<<(std::ostream& os, const FaultTransport& t) { return os << t.name; }

class TransportFaults : public ::testing::TestWithParam<FaultTransport> {
 protected:
  void SetUp() override {
    if (GetParam().ucx_tls != nullptr) ::setenv("UCX_TLS", GetParam().ucx_tls, 1);
    job_id_ = unique_shm_job_id();
    ASSERT_NE(ranks_.start_store(), 0);
  }
  void TearDown() override {
    if (GetParam().kind == Kind::kShm) shm::remove_job_segments(job_id_);
    if (GetParam().ucx_tls != nullptr) ::unsetenv("UCX_TLS");
  }

  // Connects `rank` of `size` to every other rank over the transport under test; reports and
  // ends the child on failure.
  std::unique_ptr<Transport> join(int rank, int size, int out) {
    auto store = Store::connect("127.0.0.1", ranks_.store_port(), test_store_options(), rank);
    if (!store.ok()) report_status(out, store.status());
    Result<std::unique_ptr<Transport>> t = invalid_argument("no such transport in this build");
    switch (GetParam().kind) {
      case Kind::kTcp:
        t = tcp::connect_mesh(**store, rank, size, kTcpSecret, kTcpJobId, loopback_options());
        break;
      case Kind::kShm:
        // Rings a quarter of the messages, so that a kill lands amid transfers.
        t = shm::connect(**store, rank, size, other_ranks(rank, size), job_id_,
                         shm_test_options(256 << 10));
        break;
      case Kind::kUcx: {
#ifdef HOOP_TEST_HAVE_UCX
        ucx::UcxOptions o;
        o.connect_timeout = milliseconds{20000};
        t = ucx::connect(**store, rank, size, other_ranks(rank, size), job_id_, o);
#endif
        break;
      }
    }
    if (!t.ok()) report_status(out, t.status());
    return std::move(t).value();
  }

  // Every survivor's line within 15 s of the fault: an error of one of `codes` naming `who`.
  void expect_every_survivor_names(int ranks, int victim, const std::string& who,
                                   std::vector<StatusCode> codes) {
    const auto fault_at = Clock::now();
    const Deadline bound = fault_at + std::chrono::seconds{15};
    for (int r = 0; r < ranks; ++r) {
      if (r == victim) continue;
      const std::string line = read_line(ranks_.child(r), bound);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - fault_at).count();
      ASSERT_FALSE(line.empty()) << "rank " << r << " reported nothing within 15 s";
      EXPECT_NE(line.find(who), std::string::npos) << "rank " << r << ": " << line;
      const int code = reported_code(line);
      EXPECT_TRUE(std::any_of(codes.begin(), codes.end(),
                              [&](StatusCode c) { return static_cast<int>(c) == code; }))
          << "rank " << r << ": " << line;
      std::printf("[ info ] rank %d reported after %.0f ms (not asserted): %s\n", r, ms,
                  line.c_str());
    }
  }

  std::string job_id_;
  ProcessRanks ranks_;
};

TEST_P(TransportFaults, RankKilledAmidTransfersFailsEveryOtherRankNamingIt) {
  constexpr int kRanks = 3;
  constexpr int kVictim = 2;
  ranks_.start(kRanks, [&](int rank, int out) {
    auto t = join(rank, kRanks, out);
    // 1 MiB messages: several ring fills (shm), UCX's rendezvous protocol, many socket writes.
    std::vector<std::vector<char>> outs(kRanks, std::vector<char>(1 << 20, 'x'));
    std::vector<std::vector<char>> ins(kRanks, std::vector<char>(1 << 20));
    for (long iter = 0;; ++iter) {
      if (iter == 20) say_ready(out);
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
  ASSERT_TRUE(ranks_.all_ready());
  ASSERT_EQ(::kill(ranks_.child(kVictim).pid, SIGKILL), 0);
  std::vector<StatusCode> codes = {StatusCode::kPeerLost};
  if (GetParam().abort_may_come_first) codes.push_back(StatusCode::kAborted);
  expect_every_survivor_names(kRanks, kVictim, "rank 2", codes);
  // Set-up unlinked every segment: a crash leaves nothing in /dev/shm.
  if (GetParam().kind == Kind::kShm) {
    EXPECT_TRUE(job_segments(job_id_).empty());
  }
}

TEST_P(TransportFaults, RankKilledWhileItsPeerSleepsWakesItNamingTheRank) {
  ranks_.start(2, [&](int rank, int out) {
    auto t = join(rank, 2, out);
    if (rank == 0) {
      say_ready(out);
      while (true) ::pause();
    }
    int v = 0;
    auto id = t->recv(0, &v, sizeof v);
    say_ready(out);
    report_status(out,
                  id.ok() ? wait_one(*t, *id, Clock::now() + milliseconds{60000}) : id.status());
  });
  ASSERT_TRUE(ranks_.all_ready());
  std::this_thread::sleep_for(milliseconds{100});  // let rank 1 fall asleep
  ASSERT_EQ(::kill(ranks_.child(0).pid, SIGKILL), 0);
  const std::string line = read_line(ranks_.child(1), test_deadline());
  EXPECT_EQ(reported_code(line), static_cast<int>(StatusCode::kPeerLost)) << line;
  EXPECT_NE(line.find("rank 0"), std::string::npos) << line;
  if (GetParam().names_pid) {
    EXPECT_NE(line.find(fmt::format("pid {}", ranks_.child(0).pid)), std::string::npos) << line;
  }
}

TEST_P(TransportFaults, OrderlyExitIsNoCrash) {
  ranks_.start(2, [&](int rank, int out) {
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
    say_ready(out);
    auto again = t->recv(0, &v, sizeof v);
    report_status(out, again.ok() ? wait_one(*t, *again, test_deadline()) : again.status());
  });
  ASSERT_TRUE(ranks_.all_ready());
  const std::string line = read_line(ranks_.child(1), test_deadline());
  EXPECT_EQ(reported_code(line), static_cast<int>(StatusCode::kPeerLost)) << line;
  EXPECT_NE(line.find("rank 0"), std::string::npos) << line;
  EXPECT_NE(line.find("shut its transport down"), std::string::npos) << line;
}

// The transports whose timeout names the peers that never answered it.
class SilentPeerFaults : public TransportFaults {};

// A stopped rank neither exits nor breaks its links: only deadlines notice it, and the first
// rank to time out may be one waiting on a live rank that itself waits on the stopped one.
// Here that is forced: each "collective" is a ring of steps under one deadline (as with
// HOOP_TIMEOUT_SECONDS=3), and rank 0, across the ring from the victim, has a deadline a second
// shorter (as if it entered the collective first), so it times out waiting for rank 3. Every
// survivor must still name the stopped rank 2.
TEST_P(SilentPeerFaults, StoppedRankIsNamedByEverySurvivor) {
  constexpr int kRanks = 4;
  constexpr int kVictim = 2;
  ranks_.start(kRanks, [&](int rank, int out) {
    auto t = join(rank, kRanks, out);
    const int right = (rank + 1) % kRanks;
    const int left = (rank + kRanks - 1) % kRanks;
    // 256 KiB takes UCX's rendezvous protocol: a send completes only once its receiver has it.
    std::vector<char> outgoing(256 << 10, 'x'), incoming(256 << 10);
    for (long iter = 0;; ++iter) {
      if (iter == 20) say_ready(out);
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
          t->abort(st);
          report_status(out, st);
        }
      }
    }
  });
  ASSERT_TRUE(ranks_.all_ready());
  ASSERT_EQ(::kill(ranks_.child(kVictim).pid, SIGSTOP), 0);
  expect_every_survivor_names(kRanks, kVictim, "rank 2", {StatusCode::kTimeout});
}

std::vector<FaultTransport> every_transport() {
  std::vector<FaultTransport> all = {
      {.name = "tcp", .kind = Kind::kTcp, .abort_may_come_first = true},
      {.name = "shm", .kind = Kind::kShm, .names_pid = true},
  };
#ifdef HOOP_TEST_HAVE_UCX
  all.push_back({.name = "ucx_tcp", .kind = Kind::kUcx, .ucx_tls = "tcp", .names_pid = true});
  all.push_back({.name = "ucx_posix", .kind = Kind::kUcx, .ucx_tls = "posix", .names_pid = true});
#endif
  return all;
}

std::vector<FaultTransport> transports_naming_silent_peers() {
  std::vector<FaultTransport> some;
  for (const FaultTransport& t : every_transport())
    if (t.kind == Kind::kUcx) some.push_back(t);
  return some;
}

const auto kName = [](const auto& p) { return std::string(p.param.name); };
INSTANTIATE_TEST_SUITE_P(Transports, TransportFaults, ::testing::ValuesIn(every_transport()),
                         kName);
INSTANTIATE_TEST_SUITE_P(Transports, SilentPeerFaults,
                         ::testing::ValuesIn(transports_naming_silent_peers()), kName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SilentPeerFaults);

}  // namespace
}  // namespace hoop::testing
