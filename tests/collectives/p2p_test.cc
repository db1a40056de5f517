// Point-to-point send, recv and sendrecv (collectives/algorithms/p2p.cc) with ranks as threads
// over the loopback transport: every dtype and a range of counts around a ring, messages kept
// in order, and the calls that must fail: a receive that meets a different send (tag, dtype,
// count) fails naming both sides on the receiver and, through the abort, on the sender.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "collectives/algorithms/comm_impl.h"
#include "tests/collectives/loopback_transport.h"
#include "tests/fuzz/fuzz_data.h"

namespace hoop::testing {
namespace {

/// on_ranks with messages shuffled and a deadline well inside ctest's.
std::vector<Status> on_ranks_p2p(int ranks, const std::function<Status(Communicator&)>& body) {
  return on_ranks(ranks, body, 7, std::chrono::seconds(20));
}

/// The bytes rank `from` sends to rank `to` in message `k`.
std::vector<std::byte> payload(int from, int to, int k, std::size_t bytes) {
  std::vector<std::byte> v(bytes);
  fuzz::fill_random(0x5eed, static_cast<std::uint64_t>(from * 1000 + to * 10 + k), v.data(), bytes);
  return v;
}

void expect_all_ok(const std::vector<Status>& statuses) {
  for (std::size_t r = 0; r < statuses.size(); ++r)
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].to_string();
}

class P2pRing : public ::testing::TestWithParam<int> {};

TEST_P(P2pRing, SendrecvAroundTheRingIsExactForEveryDtypeAndCount) {
  const int n = GetParam();
  expect_all_ok(on_ranks_p2p(n, [n](Communicator& comm) -> Status {
    const int me = comm.rank(), next = (me + 1) % n, prev = (me + n - 1) % n;
    int k = 0;
    for (DataType dt : kAllDataTypes) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{61}, std::size_t{4099},
                                (std::size_t{1} << 18) + 3}) {
        const std::size_t bytes = count * dtype_size(dt);
        const std::vector<std::byte> out = payload(me, next, k, bytes);
        std::vector<std::byte> in(bytes);
        HOOP_RETURN_IF_ERROR(sendrecv(
            comm, {.data = out.data(), .count = count, .dtype = dt, .peer = next, .tag = k},
            {.data = in.data(), .count = count, .dtype = dt, .peer = prev, .tag = k}));
        if (in != payload(prev, me, k, bytes))
          return internal_error(fmt::format("rank {}: message {} ({} x {}) from rank {} differs",
                                            me, k, count, dtype_name(dt), prev));
        ++k;
      }
    }
    return Status::success();
  }));
}

TEST_P(P2pRing, SendsAndRecvsArriveInOrder) {
  const int n = GetParam();
  expect_all_ok(on_ranks_p2p(n, [n](Communicator& comm) -> Status {
    // Every rank sends messages of different sizes and tags to the next, received in that
    // order; rank 0 sends first and the others pass it on, so nothing waits in a circle. The
    // sizes take both frames to their ends (48 and 256 bytes) and one past each.
    const int me = comm.rank(), next = (me + 1) % n, prev = (me + n - 1) % n;
    const std::size_t counts[] = {5, 70000, 0, 12, 13, 64, 65};
    const int messages = static_cast<int>(std::size(counts));
    auto send_all = [&]() -> Status {
      for (int k = 0; k < messages; ++k) {
        const std::vector<std::byte> out = payload(me, next, k, counts[k] * 4);
        HOOP_RETURN_IF_ERROR(
            send(comm, {.data = out.data(), .count = counts[k], .peer = next, .tag = 10 + k}));
      }
      return Status::success();
    };
    auto recv_all = [&]() -> Status {
      for (int k = 0; k < messages; ++k) {
        std::vector<std::byte> in(counts[k] * 4);
        HOOP_RETURN_IF_ERROR(
            recv(comm, {.data = in.data(), .count = counts[k], .peer = prev, .tag = 10 + k}));
        if (in != payload(prev, me, k, in.size()))
          return internal_error(fmt::format("rank {}: message {} from {} differs", me, k, prev));
      }
      return Status::success();
    };
    if (me == 0) {  // the chain starts here: every other rank first receives, then sends
      HOOP_RETURN_IF_ERROR(send_all());
      return recv_all();
    }
    HOOP_RETURN_IF_ERROR(recv_all());
    return send_all();
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, P2pRing, ::testing::Values(2, 3, 4, 7),
                         [](const auto& p) { return fmt::format("{}Ranks", p.param); });

struct Mismatch {
  const char* name;
  RecvOptions change;  // what rank 1 expects instead of {count `sent`, f32, tag 3}
  const char* names;   // in the error
  std::size_t sent = 8;
};

TEST(P2pErrors, AReceiveMeetingADifferentSendFailsOnBothRanksNamingTheField) {
  const Mismatch cases[] = {
      {"tag", {.count = 8, .dtype = DataType::kF32, .peer = 0, .tag = 4}, "tag 3 against 4"},
      {"dtype",
       {.count = 8, .dtype = DataType::kI32, .peer = 0, .tag = 3},
       "dtype f32 against i32"},
      {"count", {.count = 9, .dtype = DataType::kF32, .peer = 0, .tag = 3}, "count 8 against 9"},
      // Past the 2048 bytes that travel inside the header's frame on one side only.
      {"count, larger than a frame",
       {.count = 600, .dtype = DataType::kF32, .peer = 0, .tag = 3},
       "at most 2048 bytes against 2400 bytes (600 f32, tag 3)"},
      {"count, within a frame",
       {.count = 8, .dtype = DataType::kF32, .peer = 0, .tag = 3},
       "more than 48 bytes against 32 bytes (8 f32, tag 3)",
       100},
      // Frames of two sizes: 32 bytes go in the smallest, 80 in the next.
      {"count, frames of two sizes",
       {.count = 20, .dtype = DataType::kF32, .peer = 0, .tag = 3},
       "at most 48 or more than 256 bytes against 80 bytes (20 f32, tag 3)"},
      {"count, both in the 256-byte frame",
       {.count = 21, .dtype = DataType::kF32, .peer = 0, .tag = 3},
       "count 20 against 21",
       20},
      {"count, both in the 1 KiB frame",
       {.count = 101, .dtype = DataType::kF32, .peer = 0, .tag = 3},
       "count 100 against 101",
       100},
      {"count, frames of the two largest sizes",
       {.count = 300, .dtype = DataType::kF32, .peer = 0, .tag = 3},
       "at most 1024 or more than 2048 bytes against 1200 bytes (300 f32, tag 3)",
       100},
      {"count, both larger than a frame",
       {.count = 601, .dtype = DataType::kF32, .peer = 0, .tag = 3},
       "count 600 against 601",
       600},
  };
  for (const Mismatch& m : cases) {
    const auto statuses = on_ranks_p2p(2, [&](Communicator& comm) -> Status {
      std::vector<float> buf(1024, 1.0f);
      if (comm.rank() == 0) {
        HOOP_RETURN_IF_ERROR(
            send(comm, {.data = buf.data(), .count = m.sent, .peer = 1, .tag = 3}));
        return barrier(comm);  // the receiver's abort reaches the sender here at the latest
      }
      RecvOptions o = m.change;
      o.data = buf.data();
      return recv(comm, o);
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_FALSE(statuses[r].ok()) << m.name << ": rank " << r;
      EXPECT_NE(statuses[r].message().find(m.names), std::string::npos)
          << m.name << ": rank " << r << ": " << statuses[r].to_string();
    }
  }
}

TEST(P2pErrors, BadArgumentsAreRefusedWithoutCommunicating) {
  expect_all_ok(on_ranks_p2p(2, [](Communicator& comm) -> Status {
    float x[4] = {};
    auto refused = [](const Status& s, std::string_view needle) -> Status {
      if (s.code() == StatusCode::kInvalidArgument && s.message().find(needle) != std::string::npos)
        return Status::success();
      return internal_error(
          fmt::format("expected invalid_argument with '{}': {}", needle, s.to_string()));
    };
    HOOP_RETURN_IF_ERROR(
        refused(send(comm, {.data = x, .count = 4, .peer = comm.rank()}), "cannot send to itself"));
    HOOP_RETURN_IF_ERROR(refused(recv(comm, {.data = x, .count = 4, .peer = 5}), "peer 5"));
    return refused(send(comm, {.data = nullptr, .count = 4, .peer = 1 - comm.rank()}), "null");
  }));
}

}  // namespace
}  // namespace hoop::testing
