// The shared-memory transport's shared slots (hoop::SharedSlots) between threads of one
// process, each its own rank: every rank reads every other rank's slot call after call (the
// two slots taking turns), a root's slot alone while the root runs ahead (one call through the
// large slots, half the small slots through those), slots only where every rank is a peer, the
// same slot size and number of small slots on every rank, and the failures a gather must end
// with: a deadline naming the ranks that never published, a peer's abort, a peer's orderly
// shutdown; and the cross-memory reads beside them (read_peer, write_peer, read_memory_of's
// pieces). A peer process that dies is in shm_fault_test.cc.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/transports/shm_test_util.h"

namespace hoop::testing {
namespace {

using std::chrono::milliseconds;

/// What rank `rank` writes in call `seq`: `bytes` bytes that differ by rank, call and offset.
std::vector<std::byte> pattern(int rank, std::uint64_t seq, std::size_t bytes) {
  std::vector<std::byte> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    v[i] = static_cast<std::byte>((rank * 131 + seq * 7 + i) & 0xff);
  return v;
}

/// Publishes `buffer`'s address in slot call `seq`; every rank's published address (this
/// rank's own included) once all `ranks` have published, or nothing after a failure.
std::vector<std::uintptr_t> exchange_addresses(SharedSlots& slots, std::uint64_t seq,
                                               const void* buffer, int ranks) {
  const auto address = reinterpret_cast<std::uintptr_t>(buffer);
  std::memcpy(slots.own_slot(seq), &address, sizeof address);
  slots.publish(seq);
  std::vector<const std::byte*> at(static_cast<std::size_t>(ranks));
  if (const Status s = slots.gather(seq, at, test_deadline()); !s.ok()) {
    ADD_FAILURE() << s.to_string();
    return {};
  }
  std::vector<std::uintptr_t> addresses(at.size());
  for (std::size_t r = 0; r < at.size(); ++r)
    std::memcpy(&addresses[r], at[r], sizeof(std::uintptr_t));
  return addresses;
}

/// Slot call `seq` with nothing in it: returns once every rank has reached it.
void meet(SharedSlots& slots, std::uint64_t seq, int ranks) {
  slots.publish(seq);
  std::vector<const std::byte*> at(static_cast<std::size_t>(ranks));
  const Status s = slots.gather(seq, at, test_deadline());
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST_F(ShmTest, SlotsCarryEveryRanksDataCallAfterCall) {
  constexpr int kRanks = 4;
  run_shm_ranks(kRanks, shm_test_options(), [](int rank, Transport& t) {
    SharedSlots* slots = t.shared_slots();
    ASSERT_NE(slots, nullptr) << "rank " << rank;
    ASSERT_GE(slots->slot_bytes(), std::size_t{64} << 10);
    std::vector<const std::byte*> at(kRanks);
    for (std::uint64_t seq = 1; seq <= 2000; ++seq) {
      // Sizes vary so that a slot is read while stale bytes of a longer call sit behind it; a
      // full slot now and then.
      const std::size_t bytes = seq % 97 == 0 ? slots->slot_bytes() : (seq * 37) % 300;
      const std::vector<std::byte> mine = pattern(rank, seq, bytes);
      std::memcpy(slots->own_slot(seq), mine.data(), bytes);
      slots->publish(seq);
      const Status s = slots->gather(seq, at, test_deadline());
      ASSERT_TRUE(s.ok()) << "rank " << rank << " call " << seq << ": " << s.to_string();
      for (int r = 0; r < kRanks; ++r) {
        const std::vector<std::byte> want = pattern(r, seq, bytes);
        ASSERT_EQ(std::memcmp(at[r], want.data(), bytes), 0)
            << "rank " << rank << " read rank " << r << "'s slot of call " << seq;
      }
    }
  });
}

// The rooted calls' protocol (collectives/algorithms/one_host.h, SlotNeed): call after call a
// root, rank seq % 4, publishes its data and goes on without waiting; the others take the root's
// slot alone with gather_one. Before rewriting a slot each rank confirms, with gather, that every
// rank published the call before: so a root runs a call ahead of ranks still reading its slot.
TEST_F(ShmTest, GatherOneTakesTheRootsSlotWhileTheRootRunsAhead) {
  constexpr int kRanks = 4;
  run_shm_ranks(kRanks, shm_test_options(), [](int rank, Transport& t) {
    SharedSlots& slots = *t.shared_slots();
    std::vector<const std::byte*> at(kRanks);
    for (std::uint64_t seq = 1; seq <= 2000; ++seq) {
      if (seq > 1) {
        const Status s = slots.gather(seq - 1, at, test_deadline());
        ASSERT_TRUE(s.ok()) << "rank " << rank << " confirming call " << seq - 1 << ": "
                            << s.to_string();
      }
      const int root = static_cast<int>(seq % kRanks);
      const std::size_t bytes = (seq * 37) % 300;
      const std::vector<std::byte> data = pattern(root, seq, bytes);
      if (rank == root) std::memcpy(slots.own_slot(seq), data.data(), bytes);
      slots.publish(seq);
      if (rank == root) continue;
      const Result<const std::byte*> got = slots.gather_one(seq, root, test_deadline());
      ASSERT_TRUE(got.ok()) << "rank " << rank << " call " << seq << ": "
                            << got.status().to_string();
      ASSERT_EQ(std::memcmp(*got, data.data(), bytes), 0)
          << "rank " << rank << " read root " << root << "'s slot of call " << seq;
    }
  });
}

// The small slots' protocol (one_host.h, SlotNeed): rank 0 is the root of small call after
// call and goes on without waiting, up to half the small slots ahead: before publishing small
// call s a rank confirms every call up to s - k/2. Every 50th call is a large one that every
// rank meets in (its large slot, after confirming every call before it). Each reader takes
// the root's slot of either kind by its number alone.
TEST_F(ShmTest, SmallSlotsLetARootRunHalfTheirNumberAheadBesideTheLargeSlots) {
  constexpr int kRanks = 4;
  run_shm_ranks(kRanks, shm_test_options(), [](int rank, Transport& t) {
    SharedSlots& slots = *t.shared_slots();
    const std::uint64_t k = slots.small_slots();
    ASSERT_EQ(k, 256u) << "HOOP_SHM_RUN_AHEAD's default, 128, gives 256 small slots";
    ASSERT_EQ(slots.small_slot_bytes(), std::size_t{8192} + 64);
    std::vector<const std::byte*> at(kRanks);
    std::uint64_t confirmed = 0;
    auto confirm_through = [&](std::uint64_t upto) {
      for (; confirmed < upto; ++confirmed) {
        const Status s = slots.gather(confirmed + 1, at, test_deadline());
        ASSERT_TRUE(s.ok()) << "rank " << rank << " confirming call " << confirmed + 1 << ": "
                            << s.to_string();
      }
    };
    for (std::uint64_t seq = 1; seq <= 3000; ++seq) {
      const bool small = seq % 50 != 0;
      ASSERT_NO_FATAL_FAILURE(confirm_through(small ? (seq > k / 2 ? seq - k / 2 : 0) : seq - 1));
      const std::size_t bytes = small ? (seq * 37) % 8000 : (seq * 37) % 20000;
      const std::vector<std::byte> data = pattern(0, seq, bytes);
      if (rank == 0 || !small) {
        std::memcpy(slots.own_slot(seq, small), pattern(rank, seq, bytes).data(), bytes);
      }
      slots.publish(seq, small);
      if (!small) {
        const Status s = slots.gather(seq, at, test_deadline());
        ASSERT_TRUE(s.ok()) << "rank " << rank << " call " << seq << ": " << s.to_string();
        for (int r = 0; r < kRanks; ++r)
          ASSERT_EQ(std::memcmp(at[r], pattern(r, seq, bytes).data(), bytes), 0)
              << "rank " << rank << " read rank " << r << "'s large slot of call " << seq;
        confirmed = seq;
        continue;
      }
      if (rank == 0) continue;
      const Result<const std::byte*> got = slots.gather_one(seq, 0, test_deadline());
      ASSERT_TRUE(got.ok()) << "rank " << rank << " call " << seq << ": "
                            << got.status().to_string();
      ASSERT_EQ(std::memcmp(*got, data.data(), bytes), 0)
          << "rank " << rank << " read rank 0's small slot of call " << seq;
    }
  });
}

TEST_F(ShmTest, GatherOneRefusesItsOwnRankAndNamesARootThatNeverPublished) {
  std::barrier done(2);  // rank 0 stays connected, silent, until rank 1 has timed out
  run_shm_ranks(2, shm_test_options(), [&](int rank, Transport& t) {
    SharedSlots& slots = *t.shared_slots();
    const Result<const std::byte*> own = slots.gather_one(1, rank, test_deadline());
    EXPECT_EQ(own.status().code(), StatusCode::kInvalidArgument) << own.status().to_string();
    if (rank == 0) {
      done.arrive_and_wait();
      return;
    }
    slots.publish(1);
    const Result<const std::byte*> late = slots.gather_one(1, 0, Clock::now() + milliseconds{200});
    EXPECT_EQ(late.status().code(), StatusCode::kTimeout) << late.status().to_string();
    EXPECT_NE(late.status().message().find("rank(s) 0 did not reach collective call 1"),
              std::string::npos)
        << late.status().message();
    done.arrive_and_wait();
  });
}

TEST_F(ShmTest, SlotsOnlyWhereEveryRankIsAPeerAndWhenAskedFor) {
  // Ranks 0 and 1 of a 3-rank job share memory; rank 2 is elsewhere: no slots.
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto t = connect_shm(rank, 3, shm_test_options(), {1 - rank});
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      EXPECT_EQ((*t)->shared_slots(), nullptr);
    });
  }
  for (auto& th : threads) th.join();
  shm::ShmOptions off = shm_test_options();
  off.slot_bytes = 0;
  off.key_prefix = "hoop/shm-off";  // a second mesh: the first one's store keys are still set
  run_shm_ranks(2, off, [](int, Transport& t) { EXPECT_EQ(t.shared_slots(), nullptr); });
}

TEST_F(ShmTest, SlotSizesThatDifferBetweenRanksAreRefusedNamingTheVariable) {
  expect_refused_naming(
      [](shm::ShmOptions& o, int rank) { o.slot_bytes = rank == 0 ? 4096 : 8192; },
      "HOOP_SHM_SLOT_BYTES");
}

// Slots of unset size are wide where a rank's set-up finds its host crowded and its reads slow
// (forced here per rank): every rank fills no more than the narrowest rank's, and the default
// part, which the collectives fill elsewhere, is the same on every rank.
TEST_F(ShmTest, WideSlotsServeWholeOnlyWhereEveryRankMadeThem) {
  constexpr int kRanks = 3;
  const std::size_t narrow = shm::kSlotBytes + shm::kSlotReserve;
  const std::size_t wide = shm::kWideSlotBytes + shm::kSlotReserve;
  struct Case {
    const char* prefix;
    bool wide[kRanks];
    bool explicit_narrow_on_0;
    std::size_t want;
  };
  for (const Case& c : {Case{"hoop/shm-wide", {true, true, true}, false, wide},
                        Case{"hoop/shm-mixed", {true, false, true}, false, narrow},
                        Case{"hoop/shm-named", {false, true, true}, true, narrow}}) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < kRanks; ++rank) {
      threads.emplace_back([&, rank] {
        shm::ShmOptions o = shm_test_options();
        o.key_prefix = c.prefix;
        o.wide_slots = c.wide[rank];
        if (rank == 0 && c.explicit_narrow_on_0) o.slot_bytes = shm::kSlotBytes;
        auto t = connect_shm(rank, kRanks, o);
        ASSERT_TRUE(t.ok()) << c.prefix << " rank " << rank << ": " << t.status().to_string();
        SharedSlots& slots = *(*t)->shared_slots();
        EXPECT_EQ(slots.slot_bytes(), c.want) << c.prefix << " rank " << rank;
        EXPECT_EQ(slots.default_slot_bytes(), narrow) << c.prefix << " rank " << rank;
        // A whole slot's worth crosses from every rank to every other, both slots in turn.
        for (std::uint64_t seq = 1; seq <= 2; ++seq) {
          const std::vector<std::byte> mine = pattern(rank, seq, slots.slot_bytes());
          std::memcpy(slots.own_slot(seq), mine.data(), mine.size());
          slots.publish(seq);
          std::vector<const std::byte*> at(kRanks);
          const Status s = slots.gather(seq, at, test_deadline());
          ASSERT_TRUE(s.ok()) << s.to_string();
          for (int r = 0; r < kRanks; ++r)
            EXPECT_EQ(std::memcmp(at[r], pattern(r, seq, mine.size()).data(), mine.size()), 0)
                << c.prefix << " rank " << rank << " read rank " << r;
        }
        meet(slots, 3, kRanks);
      });
    }
    for (auto& th : threads) th.join();
  }
}

TEST_F(ShmTest, RunAheadThatDiffersBetweenRanksIsRefusedNamingTheVariable) {
  expect_refused_naming([](shm::ShmOptions& o, int rank) { o.run_ahead = rank == 0 ? 16 : 4; },
                        "HOOP_SHM_RUN_AHEAD");
}

TEST_F(ShmTest, SlotDeadlineNamesTheRanksThatNeverPublishedAndTheCauseReachesThem) {
  std::barrier timed_out(3);
  run_shm_ranks(3, shm_test_options(), [&](int rank, Transport& t) {
    SharedSlots& slots = *t.shared_slots();
    std::vector<const std::byte*> at(3);
    if (rank != 2) {
      slots.publish(1);
      const Status s = slots.gather(1, at, Clock::now() + milliseconds{300});
      EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
      EXPECT_NE(s.message().find("rank(s) 2 did not reach collective call 1"), std::string::npos)
          << s.message();
    }
    timed_out.arrive_and_wait();
    if (rank == 2) {
      // The timeout aborted the waiting ranks' transports, which told this one.
      slots.publish(1);
      const Status s = slots.gather(1, at, test_deadline());
      EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
      EXPECT_NE(s.message().find("aborted"), std::string::npos) << s.message();
    }
  });
}

TEST_F(ShmTest, SlotGatherEndsWithAPeersAbortCause) {
  std::barrier waiting(3);
  run_shm_ranks(3, shm_test_options(), [&](int rank, Transport& t) {
    SharedSlots& slots = *t.shared_slots();
    std::vector<const std::byte*> at(3);
    if (rank == 2) {
      waiting.arrive_and_wait();
      std::this_thread::sleep_for(milliseconds{50});  // the others are in gather by now
      t.abort(aborted("rank 2 gives up on purpose"));
      return;
    }
    slots.publish(1);
    waiting.arrive_and_wait();
    const Status s = slots.gather(1, at, test_deadline());
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
    EXPECT_NE(s.message().find("rank 2 gives up on purpose"), std::string::npos) << s.message();
  });
}

TEST_F(ShmTest, SlotGatherEndsWhenAPeerShutsDownInOrder) {
  std::barrier waiting(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto t = connect_shm(rank, 2, shm_test_options());
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      if (rank == 1) {
        waiting.arrive_and_wait();
        std::this_thread::sleep_for(milliseconds{50});
        t->reset();  // the goodbye, without publishing call 1
        return;
      }
      SharedSlots& slots = *(*t)->shared_slots();
      std::vector<const std::byte*> at(2);
      slots.publish(1);
      waiting.arrive_and_wait();
      const Status s = slots.gather(1, at, test_deadline());
      EXPECT_EQ(s.code(), StatusCode::kPeerLost) << s.to_string();
      EXPECT_NE(s.message().find("rank 1 shut its transport down"), std::string::npos)
          << s.message();
    });
  }
  for (auto& th : threads) th.join();
}

// The collectives leave more to the slots where the reads are slow (one_host.h's budget), so
// every rank must give the same answer: any rank's measurement counts for all. The ranks here
// are threads of one process, which measures once.
TEST_F(ShmTest, ReadSpeedVerdictIsTheSameOnEveryRank) {
  constexpr int kRanks = 3;
  run_shm_ranks(kRanks, shm_test_options(), [](int rank, Transport& t) {
    SharedSlots& slots = *t.shared_slots();
    ASSERT_TRUE(slots.can_read_peers());
    EXPECT_EQ(slots.reads_slowly(), shm::cross_memory_reads_slow()) << "rank " << rank;
    const auto verdict = static_cast<std::byte>(slots.reads_slowly());
    *slots.own_slot(1) = verdict;
    slots.publish(1);
    std::vector<const std::byte*> at(kRanks);
    const Status s = slots.gather(1, at, test_deadline());
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(*at[r], verdict) << "rank " << rank << " and " << r;
  });
}

TEST_F(ShmTest, ReadPeerCopiesFromTheAddressAPeerPublished) {
  constexpr int kRanks = 3;
  run_shm_ranks(kRanks, shm_test_options(), [](int rank, Transport& t) {
    SharedSlots& slots = *t.shared_slots();
    ASSERT_TRUE(slots.can_read_peers());
    // Sizes around a page and well beyond one read's worth of pinned pages.
    std::uint64_t seq = 0;
    for (std::size_t bytes : {std::size_t{1}, std::size_t{4095}, std::size_t{3} << 20}) {
      ++seq;
      const std::vector<std::byte> mine = pattern(rank, seq, bytes);
      const std::vector<std::uintptr_t> at = exchange_addresses(slots, seq, mine.data(), kRanks);
      ASSERT_EQ(at.size(), std::size_t{kRanks});
      for (int r = 0; r < kRanks; ++r) {
        if (r == rank) continue;
        std::vector<std::byte> got(bytes);
        const Status s =
            slots.read_peer(r, reinterpret_cast<const void*>(at[r]), got.data(), bytes);
        ASSERT_TRUE(s.ok()) << s.to_string();
        EXPECT_EQ(got, pattern(r, seq, bytes)) << "rank " << rank << " read rank " << r;
      }
      // Nobody frees its buffer while another still reads it.
      meet(slots, ++seq, kRanks);
    }
    // Itself, a rank outside the job, and an address that is not mapped.
    std::byte b{};
    EXPECT_EQ(slots.read_peer(rank, &b, &b, 1).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(slots.read_peer(kRanks, &b, &b, 1).code(), StatusCode::kInvalidArgument);
    const Status unmapped = slots.read_peer((rank + 1) % kRanks, nullptr, &b, 1);
    EXPECT_EQ(unmapped.code(), StatusCode::kIoError) << unmapped.to_string();
    EXPECT_NE(unmapped.message().find("process_vm_readv"), std::string::npos) << unmapped.message();
  });
}

// write_peer: each rank writes a pattern into the buffer the next rank published, and finds
// the previous rank's pattern in its own once every rank has written.
TEST_F(ShmTest, WritePeerCopiesToTheAddressAPeerPublished) {
  constexpr int kRanks = 3;
  run_shm_ranks(kRanks, shm_test_options(), [](int rank, Transport& t) {
    SharedSlots& slots = *t.shared_slots();
    ASSERT_TRUE(slots.can_read_peers());
    std::uint64_t seq = 0;
    for (std::size_t bytes : {std::size_t{1}, std::size_t{4095}, std::size_t{3} << 20}) {
      std::vector<std::byte> mine(bytes, std::byte{0});
      const std::vector<std::uintptr_t> at = exchange_addresses(slots, ++seq, mine.data(), kRanks);
      ASSERT_EQ(at.size(), std::size_t{kRanks});
      const int next = (rank + 1) % kRanks;
      const std::vector<std::byte> mark = pattern(rank, seq, bytes);
      const Status s =
          slots.write_peer(next, mark.data(), reinterpret_cast<void*>(at[next]), bytes);
      ASSERT_TRUE(s.ok()) << s.to_string();
      // Every rank has written before any looks; nobody frees its buffer before every rank has.
      meet(slots, ++seq, kRanks);
      const int previous = (rank + kRanks - 1) % kRanks;
      EXPECT_EQ(mine, pattern(previous, seq - 1, bytes)) << "rank " << rank << ", " << bytes;
      meet(slots, ++seq, kRanks);
    }
    // Itself, a rank outside the job, and an address that is not mapped.
    std::byte b{};
    EXPECT_EQ(slots.write_peer(rank, &b, &b, 1).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(slots.write_peer(kRanks, &b, &b, 1).code(), StatusCode::kInvalidArgument);
    const Status unmapped = slots.write_peer((rank + 1) % kRanks, &b, nullptr, 1);
    EXPECT_EQ(unmapped.code(), StatusCode::kIoError) << unmapped.to_string();
    EXPECT_NE(unmapped.message().find("process_vm_writev"), std::string::npos)
        << unmapped.message();
  });
}

// read_memory_of reads remote pieces less than a page apart as one range, the bytes between
// them into scratch: the local pieces get exactly the remote pieces' bytes, whatever the gaps,
// the order and the local side's cuts (over IOV_MAX iovecs a side), local bytes between pieces
// stay untouched, and pieces on either side of a page that is not mapped read without it.
TEST(ShmPeers, ReadMemoryOfPiecesGetsExactlyThePiecesWhateverTheirGaps) {
  std::vector<std::byte> source(std::size_t{1} << 20);
  for (std::size_t i = 0; i < source.size(); ++i)
    source[i] = static_cast<std::byte>((i * 7 + i / 251) & 0xff);
  const auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  std::mt19937 rng(5);
  auto uniform = [&](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<MemoryPiece> remote;
    std::vector<std::byte> expected;
    // Gaps mostly below a page (coalesced), some of a page and more (not), some none.
    for (std::size_t at = uniform(0, 64); remote.size() < 700;) {
      const std::size_t bytes = uniform(1, trial % 2 == 0 ? 64 : 5000);
      if (at + bytes > source.size()) break;
      remote.push_back({address(source.data() + at), bytes});
      at += bytes + (uniform(0, 9) == 0 ? uniform(4096, 9000) : uniform(0, 4095) / uniform(1, 64));
    }
    if (trial % 3 == 1) std::reverse(remote.begin(), remote.end());
    for (const MemoryPiece& m : remote) {
      const auto* p = reinterpret_cast<const std::byte*>(m.address);
      expected.insert(expected.end(), p, p + m.bytes);
    }
    // The local side: the same total in pieces of its own, each a byte apart.
    std::vector<std::byte> got(expected.size() * 2 + 1, std::byte{0xee});
    std::vector<MemoryPiece> local;
    std::size_t placed = 0;
    std::size_t at = 1;
    while (placed < expected.size()) {
      const std::size_t bytes = std::min(expected.size() - placed, uniform(1, 3000));
      local.push_back({address(got.data() + at), bytes});
      placed += bytes;
      at += bytes + 1;
    }
    ASSERT_EQ(shm::read_memory_of(::getpid(), remote, local), 0) << "trial " << trial;
    std::vector<std::byte> read;
    for (const MemoryPiece& m : local) {
      const auto* p = reinterpret_cast<const std::byte*>(m.address);
      read.insert(read.end(), p, p + m.bytes);
      EXPECT_EQ(p[m.bytes], std::byte{0xee}) << "trial " << trial << ": a byte between pieces";
    }
    ASSERT_EQ(read, expected) << "trial " << trial;
  }
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  auto* pages = static_cast<std::byte*>(
      ::mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(pages, MAP_FAILED);
  std::memset(pages, 0x5a, page);
  std::memset(pages + 2 * page, 0xa5, page);
  ASSERT_EQ(::munmap(pages + page, page), 0);
  for (std::size_t second : {std::size_t{0}, std::size_t{5}}) {
    const std::vector<MemoryPiece> remote = {{address(pages + page - 100), 100},
                                             {address(pages + 2 * page + second), 100}};
    std::vector<std::byte> got(200);
    const MemoryPiece into{address(got.data()), got.size()};
    ASSERT_EQ(shm::read_memory_of(::getpid(), remote, {&into, 1}), 0) << second;
    EXPECT_EQ(got[99], std::byte{0x5a});
    EXPECT_EQ(got[100], std::byte{0xa5});
  }
  ::munmap(pages, page);
  ::munmap(pages + 2 * page, page);
}

TEST_F(ShmTest, SlotGatherRefusesAWrongNumberOfSlots) {
  run_shm_ranks(2, shm_test_options(), [](int, Transport& t) {
    std::vector<const std::byte*> at(3);
    const Status s = t.shared_slots()->gather(1, at, test_deadline());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  });
}

}  // namespace
}  // namespace hoop::testing
