// Small cached allreduces whose inputs travel with the negotiation (RequestList::carried): the
// encoding, which tensors carry, and how the coordinator hands every rank's input to the
// executor, without processes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/coordinator.h"
#include "runtime/message.h"

namespace hoop::runtime {
namespace {

const Clock::time_point kStart = Clock::now();

Request small(const std::string& name, std::int64_t floats = 2) {
  Request r;
  r.name = name;
  r.dtype = DataType::kF32;
  r.shape = {floats};
  return r;
}

/// A list naming `cached` whose inputs are `carried` (the floats of every carried tensor).
RequestList carrying(std::vector<std::uint32_t> cached, const std::vector<float>& carried) {
  RequestList l;
  l.cached = std::move(cached);
  l.carries = true;
  l.carried.resize(carried.size() * sizeof(float));
  std::memcpy(l.carried.data(), carried.data(), l.carried.size());
  return l;
}

std::vector<float> floats_of(const std::string& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

TEST(CarriedMessage, InputsRoundTripAndATruncationIsAProtocolError) {
  const RequestList l = carrying({0, 3}, {1, 2, 3, 4});
  const std::string bytes = encode(l);
  auto back = decode_request_list(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(back->carries);
  EXPECT_EQ(back->carried, l.carried);
  EXPECT_EQ(back->cached, l.cached);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_EQ(decode_request_list(bytes.substr(0, cut)).status().code(), StatusCode::kProtocolError)
        << cut;
  RequestList plain;
  plain.cached = {1};
  back = decode_request_list(encode(plain));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->carries);
  std::string unknown_flag = encode(plain);
  unknown_flag.back() = static_cast<char>(unknown_flag.back() | 0x40);
  EXPECT_EQ(decode_request_list(unknown_flag).status().code(), StatusCode::kProtocolError);
}

TEST(CarriedMessage, OnlySmallHostAllreducesOfElementWiseOpsCarry) {
  EXPECT_TRUE(carried_in_negotiation(small("a", 64)));  // 256 B
  EXPECT_FALSE(carried_in_negotiation(small("a", 65)));
  EXPECT_TRUE(carried_in_negotiation(small("empty", 0)));
  Request r = small("a");
  r.device = 0;
  EXPECT_FALSE(carried_in_negotiation(r));
  r = small("a");
  r.op = ReduceOp::kAdasum;
  EXPECT_FALSE(carried_in_negotiation(r));
  r = small("a");
  r.group = "a";
  r.group_size = 2;
  EXPECT_FALSE(carried_in_negotiation(r));
  r = small("a");
  r.type = OpType::kBroadcast;
  EXPECT_FALSE(carried_in_negotiation(r));
  // A list spends kCarryMaxListBytes in order; a tensor past it does not carry, a later smaller
  // one still may.
  CarryBudget budget;
  int taken = 0;
  for (int i = 0; i < 16; ++i) taken += budget.take(small("t", 64)) ? 1 : 0;
  EXPECT_EQ(taken, 16);
  EXPECT_FALSE(budget.take(small("t", 1)));
  EXPECT_EQ(budget.used(), kCarryMaxListBytes);
}

TEST(CarriedCoordinator, EveryRanksInputComesInRankOrderWithTheResponse) {
  ResponseCache cache(8);
  cache.put(small("a"));
  cache.put(small("b", 1));
  Coordinator c(3, 1 << 20, cache);
  ASSERT_TRUE(c.add(2, carrying({0, 1}, {20, 21, 22}), kStart).ok());
  ASSERT_TRUE(c.add(0, carrying({0, 1}, {0, 1, 2}), kStart).ok());
  ASSERT_TRUE(c.add(1, carrying({0, 1}, {10, 11, 12}), kStart).ok());
  ResponseList l = c.take_ready();
  // Each its own response, unfused: nothing runs in a collective.
  ASSERT_EQ(l.responses.size(), 2u);
  EXPECT_TRUE(l.responses[0].carried);
  EXPECT_EQ(l.responses[0].tensors.front()->name, "a");
  EXPECT_EQ(floats_of(l.responses[0].inputs), (std::vector<float>{0, 1, 10, 11, 20, 21}));
  EXPECT_EQ(l.responses[1].tensors.front()->name, "b");
  EXPECT_EQ(floats_of(l.responses[1].inputs), (std::vector<float>{2, 12, 22}));
  EXPECT_EQ(c.carried_responses(), 2u);
  // The next step again.
  for (int r = 0; r < 3; ++r)
    ASSERT_TRUE(c.add(r, carrying({1}, {static_cast<float>(r)}), kStart).ok());
  l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_EQ(floats_of(l.responses[0].inputs), (std::vector<float>{0, 1, 2}));
}

TEST(CarriedCoordinator, ARankWithoutItsInputSendsTheTensorToACollective) {
  ResponseCache cache(8);
  cache.put(small("a"));
  cache.put(small("b"));
  Coordinator c(2, 1 << 20, cache);
  ASSERT_TRUE(c.add(0, carrying({0, 1}, {1, 2, 3, 4}), kStart).ok());
  RequestList bare;
  bare.cached = {0};
  ASSERT_TRUE(c.add(1, bare, kStart).ok());
  // A rank whose cache had not caught up describes the tensor in full, with no input.
  RequestList described;
  described.requests = {small("b")};
  ASSERT_TRUE(c.add(1, described, kStart).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);  // fused, as any two allreduces of a kind
  EXPECT_FALSE(l.responses[0].carried);
  EXPECT_TRUE(l.responses[0].inputs.empty());
  EXPECT_EQ(l.responses[0].tensors.size(), 2u);
  EXPECT_EQ(c.carried_responses(), 0u);
}

TEST(CarriedCoordinator, AJoinDropsTheInputsOfWaitingSlots) {
  ResponseCache cache(8);
  cache.put(small("a"));
  Coordinator c(3, 1 << 20, cache);
  ASSERT_TRUE(c.add(0, carrying({0}, {1, 2}), kStart).ok());
  RequestList join;
  join.join = true;
  ASSERT_TRUE(c.add(2, join, kStart).ok());
  ASSERT_TRUE(c.add(1, carrying({0}, {3, 4}), kStart).ok());
  ResponseList l = c.take_ready();
  ASSERT_EQ(l.responses.size(), 1u);
  EXPECT_FALSE(l.responses[0].carried);
  EXPECT_EQ(l.responses[0].joined, std::vector<std::int32_t>{2});
}

TEST(CarriedCoordinator, InputsOfTheWrongLengthAreAProtocolErrorNamingTheRank) {
  ResponseCache cache(8);
  cache.put(small("a"));
  Coordinator c(2, 1 << 20, cache);
  Status s = c.add(1, carrying({0}, {1, 2, 3}), kStart);
  EXPECT_EQ(s.code(), StatusCode::kProtocolError);
  EXPECT_NE(s.message().find("rank 1 sent 12 bytes of small tensors' inputs where its list calls "
                             "for 8"),
            std::string::npos)
      << s.message();
  RequestList stray;
  stray.carried = "xx";  // inputs without the flag
  EXPECT_EQ(c.add(0, stray, kStart).code(), StatusCode::kProtocolError);
}

}  // namespace
}  // namespace hoop::runtime
