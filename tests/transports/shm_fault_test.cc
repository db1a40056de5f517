// The shared-memory transport's own faults: a rank killed during set-up leaves its segment
// named, and remove_job_segments (which hooprun calls when a job ends) sweeps it; a rank killed
// while its peers wait in a shared-slot gather fails them naming it; a rank whose memory the
// others may not read (cross-memory attach refused) leaves every rank on the rings alike, and a
// receive of a single-copy message whose sender was killed names it. The
// faults every transport shares are in fault_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "tests/transports/process_ranks.h"
#include "tests/transports/shm_test_util.h"

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

TEST(ShmProcessTest, RankKilledDuringSetUpLeavesASegmentThatRemoveJobSegmentsSweeps) {
  ProcessRanks ranks;
  const std::uint16_t port = ranks.start_store();
  ASSERT_NE(port, 0);
  const std::string job_id = unique_shm_job_id();
  // Rank 0 of a 2-rank job waits for a rank 1 that never comes, with its segment still named.
  ranks.start(1, [&](int, int out) {
    auto store = Store::connect("127.0.0.1", port, test_store_options(), 0);
    if (!store.ok()) report_status(out, store.status());
    shm::ShmOptions o = shm_test_options();
    o.connect_timeout = milliseconds{60000};
    auto t = shm::connect(**store, 0, 2, other_ranks(0, 2), job_id, o);
    report(out, "connected without its peer");
  });
  const Deadline deadline = test_deadline();
  while (job_segments(job_id).empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds{10});
  }
  ASSERT_EQ(job_segments(job_id).size(), 1u);
  ASSERT_EQ(::kill(ranks.child(0).pid, SIGKILL), 0);
  ::waitpid(ranks.child(0).pid, nullptr, 0);
  EXPECT_EQ(job_segments(job_id).size(), 1u);
  EXPECT_EQ(shm::remove_job_segments(job_id), 1);
  EXPECT_TRUE(job_segments(job_id).empty());
}

/// Connects `rank` of a one-host job of `size` ranks over shm through the store at `port`;
/// reports the failure and ends the child otherwise.
std::unique_ptr<Transport> join_shm(std::uint16_t port, int rank, int size,
                                    const std::string& job_id, int out) {
  auto store = Store::connect("127.0.0.1", port, test_store_options(), rank);
  if (!store.ok()) report_status(out, store.status());
  auto t = shm::connect(**store, rank, size, other_ranks(rank, size), job_id, shm_test_options());
  if (!t.ok()) report_status(out, t.status());
  return std::move(*t);
}

/// Takes CAP_SYS_PTRACE away from this process (root's way past ptrace rules) and, with
/// `closed`, makes it non-dumpable: processes without the capability can no longer read its
/// memory, as under a strict ptrace policy.
bool restrict_cross_memory_attach(bool closed) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
  data[CAP_TO_INDEX(CAP_SYS_PTRACE)].permitted &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
  if (::syscall(SYS_capset, &header, data) != 0) return false;
  return !closed || ::prctl(PR_SET_DUMPABLE, 0) == 0;
}

TEST(ShmProcessTest, WhereCrossMemoryAttachIsRefusedEveryRankAgreesAndMessagesStillFlow) {
  constexpr int kRanks = 3;
  ProcessRanks ranks;
  const std::uint16_t port = ranks.start_store();
  ASSERT_NE(port, 0);
  const std::string job_id = unique_shm_job_id();
  ranks.start(kRanks, [&](int rank, int out) {
    // Only rank 2 is closed to the others (it can read them): every rank must still give the
    // same answer.
    if (!restrict_cross_memory_attach(rank == 2)) report(out, "could not drop CAP_SYS_PTRACE");
    std::unique_ptr<Transport> t = join_shm(port, rank, kRanks, job_id, out);
    SharedSlots* slots = t->shared_slots();
    if (slots == nullptr) report(out, "no shared slots");
    if (slots->can_read_peers()) report(out, "can read its peers");
    // A small message and an exchange's past the single-copy threshold: a sender lends its
    // buffer only to a receiver that can read it (rank 2 here), the rest go through the rings.
    const int from = (rank + kRanks - 1) % kRanks;
    int v = rank;
    int got = -1;
    std::vector<std::uint8_t> big(100000), big_in(100000);
    fill_pattern(big, rank, 1, 2);
    auto a = t->send((rank + 1) % kRanks, &v, sizeof v);
    auto b = t->recv(from, &got, sizeof got);
    auto c = t->send_lent((rank + 1) % kRanks, big.data(), big.size());
    auto d = t->recv(from, big_in.data(), big_in.size());
    const RequestId ids[] = {*a, *b, *c, *d};
    const Status s = t->wait(ids, test_deadline());
    if (!s.ok()) report_status(out, s);
    // Shut down in order before the child exits: a peer still waiting for its own lent send
    // to be read would otherwise see this rank die.
    t.reset();
    report(out, got == from && pattern_mismatch(big_in, from, 1, 2) == -1 ? "OK" : "wrong value");
  });
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(read_line(ranks.child(r), test_deadline()), "OK") << "rank " << r;
  shm::remove_job_segments(job_id);
}

TEST(ShmProcessTest, RankKilledWhileItsPeersWaitInASlotGatherFailsThemNamingRankAndPid) {
  constexpr int kRanks = 3;
  ProcessRanks ranks;
  const std::uint16_t port = ranks.start_store();
  ASSERT_NE(port, 0);
  const std::string job_id = unique_shm_job_id();
  ranks.start(kRanks, [&](int rank, int out) {
    std::unique_ptr<Transport> t = join_shm(port, rank, kRanks, job_id, out);
    SharedSlots* slots = t->shared_slots();
    if (slots == nullptr) report(out, "no shared slots");
    std::vector<const std::byte*> at(kRanks);
    // A few calls together, then rank 2 stops publishing and is killed.
    for (std::uint64_t seq = 1;; ++seq) {
      if (rank == 2 && seq == 50) {
        say_ready(out);
        while (true) ::pause();
      }
      if (rank != 2 && seq == 50) say_ready(out);
      slots->publish(seq);
      const Status s = slots->gather(seq, at, Clock::now() + milliseconds{60000});
      if (!s.ok()) report_status(out, s);
    }
  });
  ASSERT_TRUE(ranks.all_ready());
  std::this_thread::sleep_for(milliseconds{100});  // let the others fall asleep
  ASSERT_EQ(::kill(ranks.child(2).pid, SIGKILL), 0);
  for (int r = 0; r < 2; ++r) {
    const std::string line = read_line(ranks.child(r), test_deadline());
    EXPECT_EQ(reported_code(line), static_cast<int>(StatusCode::kPeerLost)) << line;
    EXPECT_NE(line.find("rank 2"), std::string::npos) << line;
    EXPECT_NE(line.find(fmt::format("pid {}", ranks.child(2).pid)), std::string::npos) << line;
  }
  shm::remove_job_segments(job_id);
}

TEST(ShmProcessTest, ALentSendWhoseSenderIsKilledFailsTheReceiveNamingRankAndPid) {
  ProcessRanks ranks;
  const std::uint16_t port = ranks.start_store();
  ASSERT_NE(port, 0);
  const std::string job_id = unique_shm_job_id();
  // Created by the test once rank 1 is dead: only then does rank 0 post its receive.
  const std::string dead = fmt::format("/tmp/hoop-lent-{}-dead", ::getpid());
  ::unlink(dead.c_str());
  ranks.start(2, [&](int rank, int out) {
    std::unique_ptr<Transport> t = join_shm(port, rank, 2, job_id, out);
    std::vector<std::uint8_t> buf(std::size_t{1} << 20, 1);
    if (rank == 1) {
      // An exchange's send past the single-copy threshold: only the address goes into rank
      // 0's ring.
      if (!t->send_lent(0, buf.data(), buf.size()).ok()) report(out, "send refused");
      say_ready(out);
      while (true) ::pause();
    }
    say_ready(out);
    const Deadline deadline = test_deadline();
    while (::access(dead.c_str(), F_OK) != 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds{5});
    auto id = t->recv(1, buf.data(), buf.size());
    if (!id.ok()) report_status(out, id.status());
    const RequestId ids[] = {*id};
    const Status s = t->wait(ids, test_deadline());
    if (!s.ok()) report_status(out, s);
    report(out, "received from a dead rank");
  });
  ASSERT_TRUE(ranks.all_ready());
  ASSERT_EQ(::kill(ranks.child(1).pid, SIGKILL), 0);
  ::waitpid(ranks.child(1).pid, nullptr, 0);
  std::FILE* f = std::fopen(dead.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  const std::string line = read_line(ranks.child(0), test_deadline());
  EXPECT_EQ(reported_code(line), static_cast<int>(StatusCode::kPeerLost)) << line;
  EXPECT_NE(line.find("rank 1"), std::string::npos) << line;
  EXPECT_NE(line.find(fmt::format("pid {}", ranks.child(1).pid)), std::string::npos) << line;
  ::unlink(dead.c_str());
  shm::remove_job_segments(job_id);
}

TEST(ShmProcessTest, ReadingTheMemoryOfARankThatDiedFailsNamingRankAndPid) {
  ProcessRanks ranks;
  const std::uint16_t port = ranks.start_store();
  ASSERT_NE(port, 0);
  const std::string job_id = unique_shm_job_id();
  ranks.start(2, [&](int rank, int out) {
    std::unique_ptr<Transport> t = join_shm(port, rank, 2, job_id, out);
    SharedSlots& slots = *t->shared_slots();
    static std::uint64_t value = 0x686f6f70;
    const auto address = reinterpret_cast<std::uintptr_t>(&value);
    std::memcpy(slots.own_slot(1), &address, sizeof address);
    slots.publish(1);
    std::vector<const std::byte*> at(2);
    const Status met = slots.gather(1, at, test_deadline());
    if (!met.ok()) report_status(out, met);
    say_ready(out);
    if (rank == 1) {
      while (true) ::pause();
    }
    // Reads succeed while rank 1 lives; once it is killed, the next read names it.
    std::uintptr_t theirs = 0;
    std::memcpy(&theirs, at[1], sizeof theirs);
    const Deadline deadline = test_deadline();
    while (Clock::now() < deadline) {
      std::uint64_t got = 0;
      const Status s = slots.read_peer(1, reinterpret_cast<const void*>(theirs), &got, sizeof got);
      if (!s.ok()) report_status(out, s);
      if (got != value) report(out, "read a wrong value");
      std::this_thread::sleep_for(milliseconds{1});
    }
    report(out, "reads never failed");
  });
  ASSERT_TRUE(ranks.all_ready());
  ASSERT_EQ(::kill(ranks.child(1).pid, SIGKILL), 0);
  const std::string line = read_line(ranks.child(0), test_deadline());
  EXPECT_EQ(reported_code(line), static_cast<int>(StatusCode::kPeerLost)) << line;
  EXPECT_NE(line.find("rank 1"), std::string::npos) << line;
  EXPECT_NE(line.find(fmt::format("pid {}", ranks.child(1).pid)), std::string::npos) << line;
  shm::remove_job_segments(job_id);
}

}  // namespace
}  // namespace hoop::testing
