// The store against clients that are wrong, slow or hostile: bad secrets, job ids and
// versions, impostor servers, garbage, oversized frames, idle and half-sent connections,
// clients that never read. Each must cost only its own connection.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/crypto.h"
#include "tests/rendezvous/store_test_util.h"

namespace hoop::testing {
namespace {

using rendezvous::Opcode;
using std::chrono::milliseconds;

std::string frame_header(std::uint32_t length, std::uint8_t op) {
  std::string h(rendezvous::kFrameHeaderBytes, '\0');
  for (int i = 0; i < 4; ++i) h[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  h[4] = static_cast<char>(op);
  return h;
}

// The error frame that ends `received` (after the server hello, possibly).
Status last_error_in(const std::string& received) {
  std::size_t pos = 0;
  Status last = internal_error("no error frame received");
  while (received.size() - pos >= rendezvous::kFrameHeaderBytes) {
    const auto h = rendezvous::decode_header(received.data() + pos);
    const std::size_t end = pos + rendezvous::kFrameHeaderBytes + h.length;
    if (end > received.size()) break;
    if (h.op == static_cast<std::uint8_t>(Opcode::kError)) {
      last = rendezvous::decode_error(
          std::string_view(received).substr(pos + rendezvous::kFrameHeaderBytes, h.length));
    }
    pos = end;
  }
  return last;
}

TEST_F(StoreTest, WrongSecretIsRefusedAndOthersAreStillServed) {
  StoreOptions wrong = test_options();
  wrong.secret = "not-the-secret";
  auto store = Store::connect("127.0.0.1", port_, wrong, 5);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kAuthFailed) << store.status().to_string();
  EXPECT_NE(store.status().message().find("authentication failed: wrong job secret"),
            std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find("store at 127.0.0.1:" + std::to_string(port_)),
            std::string::npos)
      << store.status().message();
  EXPECT_EQ(server_->stats().auth_failures, 1u);
  EXPECT_EQ(server_->stats().accepted, 0u);
  expect_store_serves("after-wrong-secret");
  EXPECT_EQ(server_->stats().accepted, 1u);
}

TEST_F(StoreTest, WrongJobIdIsRefusedNamingBothIds) {
  StoreOptions other = test_options();
  other.job_id = "job-7";
  auto store = Store::connect("127.0.0.1", port_, other);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kAuthFailed);
  const std::string msg = store.status().message();
  EXPECT_NE(msg.find("job id mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"job-7\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"job-42\""), std::string::npos) << msg;
  EXPECT_EQ(server_->stats().auth_failures, 1u);
  expect_store_serves("after-wrong-job");
}

TEST_F(StoreTest, WrongProtocolVersionIsRefusedNamingBothVersions) {
  auto raw = RawClient::connect(port_);
  ASSERT_NE(raw, nullptr);
  auto answer = raw->handshake(kSecret, kJobId, /*version=*/99);
  ASSERT_TRUE(answer.ok()) << answer.status().to_string();
  ASSERT_EQ(answer->op, static_cast<std::uint8_t>(Opcode::kError));
  const Status refusal = rendezvous::decode_error(answer->payload);
  EXPECT_EQ(refusal.code(), StatusCode::kAuthFailed);
  EXPECT_NE(refusal.message().find("version 99"), std::string::npos) << refusal.message();
  EXPECT_NE(refusal.message().find("version 1"), std::string::npos) << refusal.message();
  EXPECT_TRUE(raw->read_until_closed().ok());
  EXPECT_EQ(server_->stats().auth_failures, 1u);
  expect_store_serves("after-wrong-version");
}

TEST_F(StoreTest, RawHandshakeWithTheRightSecretIsAccepted) {
  auto raw = RawClient::connect(port_);
  ASSERT_NE(raw, nullptr);
  auto answer = raw->handshake();
  ASSERT_TRUE(answer.ok()) << answer.status().to_string();
  EXPECT_EQ(answer->op, static_cast<std::uint8_t>(Opcode::kServerProof));
  EXPECT_EQ(answer->payload.size(), rendezvous::kProofBytes);
  ASSERT_TRUE(raw->send(rendezvous::encode_get("nothing")).ok());
  auto reply = raw->read_frame();
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(rendezvous::decode_error(reply->payload).code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, ClientRefusesAnImpostorServer) {
  auto listener = net::listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  auto impostor = std::async(std::launch::async, [&]() -> Status {
    pollfd p{listener->fd.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(kTestTimeout.count())) != 1) {
      return timeout_error("nobody came");
    }
    auto peer = RawClient::adopt(Fd(::accept(listener->fd.get(), nullptr, nullptr)));
    HOOP_RETURN_IF_ERROR(peer->send(rendezvous::encode_server_hello(
        {rendezvous::kProtocolVersion, std::string(rendezvous::kNonceBytes, 's')})));
    HOOP_ASSIGN_OR_RETURN(RawFrame hello, peer->read_frame());
    if (hello.op != static_cast<std::uint8_t>(Opcode::kClientHello)) {
      return protocol_error("expected a client hello");
    }
    // Without the secret the best an impostor can do is guess a proof.
    HOOP_RETURN_IF_ERROR(peer->send(rendezvous::FrameBuilder(Opcode::kServerProof)
                                        .bytes(std::string(rendezvous::kProofBytes, 'p'))
                                        .finish()));
    return peer->read_until_closed().status();
  });
  auto store = Store::connect("127.0.0.1", listener->port, test_options());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kAuthFailed) << store.status().to_string();
  EXPECT_NE(store.status().message().find("could not prove it knows the job secret"),
            std::string::npos)
      << store.status().message();
  EXPECT_TRUE(impostor.get().ok());
}

TEST_F(StoreTest, GarbageBytesCloseOnlyThatConnection) {
  std::mt19937 rng(12345);
  std::string garbage(8192, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  for (const std::string& bytes : {garbage, std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}) {
    auto raw = RawClient::connect(port_);
    ASSERT_NE(raw, nullptr);
    ASSERT_TRUE(raw->send(bytes).ok());
    auto received = raw->read_until_closed();
    ASSERT_TRUE(received.ok()) << received.status().to_string();
    EXPECT_EQ(last_error_in(*received).code(), StatusCode::kProtocolError);
  }
  EXPECT_TRUE(eventually([&] { return server_->stats().protocol_errors == 2; }));
  EXPECT_EQ(server_->stats().auth_failures, 0u);
  expect_store_serves("after-garbage");
}

TEST_F(StoreTest, HugeFrameLengthInTheHandshakeIsNotAllocated) {
  auto raw = RawClient::connect(port_);
  ASSERT_NE(raw, nullptr);
  ASSERT_TRUE(raw->send(frame_header(0xFFFFFFFFu, 2)).ok());
  auto received = raw->read_until_closed();
  ASSERT_TRUE(received.ok()) << received.status().to_string();
  const Status why = last_error_in(*received);
  EXPECT_NE(why.message().find("4294967295 bytes exceeds the limit of 4096"), std::string::npos)
      << why.to_string();
  EXPECT_EQ(server_->stats().protocol_errors, 1u);
  expect_store_serves("after-huge-handshake-frame");
}

TEST_F(StoreTest, HugeFrameLengthAfterTheHandshakeIsNotAllocated) {
  auto raw = RawClient::connect(port_);
  ASSERT_NE(raw, nullptr);
  ASSERT_TRUE(raw->handshake().ok());
  ASSERT_TRUE(raw->send(frame_header(0xFFFFFFFFu, static_cast<std::uint8_t>(Opcode::kSet))).ok());
  auto received = raw->read_until_closed();
  ASSERT_TRUE(received.ok()) << received.status().to_string();
  const Status why = last_error_in(*received);
  EXPECT_EQ(why.code(), StatusCode::kProtocolError);
  EXPECT_NE(why.message().find("set frame of 4294967295 bytes exceeds the limit"),
            std::string::npos)
      << why.to_string();
  EXPECT_EQ(server_->stats().protocol_errors, 1u);
  EXPECT_EQ(server_->stats().accepted, 1u);
  expect_store_serves("after-huge-frame");
}

TEST_F(StoreTest, UnknownOpcodesAndMalformedRequestsEndTheConnection) {
  std::string bad_wait = frame_header(12, static_cast<std::uint8_t>(Opcode::kWait));
  bad_wait += std::string(8, '\0') + std::string("\xff\xff\xff\x0f", 4);  // 268M keys, no bytes
  const std::vector<std::string> bad_frames = {
      frame_header(0, 99), frame_header(0, static_cast<std::uint8_t>(Opcode::kClientHello)),
      frame_header(3, static_cast<std::uint8_t>(Opcode::kAdd)) + "abc", bad_wait,
      frame_header(2, static_cast<std::uint8_t>(Opcode::kSet)) + "ab"};
  for (const std::string& frame : bad_frames) {
    auto raw = RawClient::connect(port_);
    ASSERT_NE(raw, nullptr);
    ASSERT_TRUE(raw->handshake().ok());
    ASSERT_TRUE(raw->send(frame).ok());
    auto received = raw->read_until_closed();
    ASSERT_TRUE(received.ok()) << received.status().to_string();
    EXPECT_EQ(last_error_in(*received).code(), StatusCode::kProtocolError)
        << last_error_in(*received).to_string();
  }
  EXPECT_EQ(server_->stats().protocol_errors, bad_frames.size());
  expect_store_serves("after-malformed");
}

TEST_F(StoreTest, IdleAndHalfFrameConnectionsDoNotDelayOthers) {
  auto idle = RawClient::connect(port_);
  auto half_hello = RawClient::connect(port_);
  auto half_request = RawClient::connect(port_);
  ASSERT_NE(idle, nullptr);
  ASSERT_NE(half_hello, nullptr);
  ASSERT_NE(half_request, nullptr);
  ASSERT_TRUE(half_hello->send(frame_header(200, 2) + "HOOPSTOR").ok());
  ASSERT_TRUE(half_request->handshake().ok());
  ASSERT_TRUE(
      half_request->send(frame_header(100, static_cast<std::uint8_t>(Opcode::kSet)) + "0123456789")
          .ok());
  auto store = connect();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 200; ++i) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_TRUE(store->set(key, "v").ok());
    ASSERT_TRUE(store->wait({key}, kTestTimeout).ok());
    ASSERT_EQ(*store->add("n", 1), i + 1);
  }
  EXPECT_EQ(server_->stats().protocol_errors, 0u);
}

TEST_F(StoreTest, HandshakeDeadlineDropsIdleConnections) {
  StoreOptions options = test_options();
  options.handshake_timeout = milliseconds{200};
  start_server(options);
  auto idle = RawClient::connect(port_);
  ASSERT_NE(idle, nullptr);
  auto received = idle->read_until_closed();
  ASSERT_TRUE(received.ok()) << received.status().to_string();
  const Status why = last_error_in(*received);
  EXPECT_NE(why.message().find("no complete handshake within 200 ms"), std::string::npos)
      << why.to_string();
  EXPECT_EQ(server_->stats().protocol_errors, 1u);
  // An authenticated client may stay idle as long as it likes.
  auto store = connect(options);
  ASSERT_NE(store, nullptr);
  std::this_thread::sleep_for(milliseconds{400});
  EXPECT_TRUE(store->set("still", "here").ok());
  EXPECT_EQ(server_->stats().protocol_errors, 1u);
}

TEST_F(StoreTest, AClientThatNeverReadsDoesNotBlockOthers) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->set("big", std::string(std::size_t{1} << 20, 'b')).ok());
  auto hog = RawClient::connect(port_);
  ASSERT_NE(hog, nullptr);
  ASSERT_TRUE(hog->handshake().ok());
  // 64 MiB of answers that are never read: the server must stop reading from it rather
  // than stall or buffer without bound.
  std::string requests;
  for (int i = 0; i < 64; ++i) requests += rendezvous::encode_get("big");
  ASSERT_TRUE(hog->send(requests).ok());
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(*store->add("progress", 1), i + 1);
  }
  EXPECT_EQ(store->get("big")->size(), std::size_t{1} << 20);
  hog.reset();
  expect_store_serves("after-hog");
}

TEST_F(StoreTest, PipelinedRequestsAreAnsweredInOrderAroundAParkedWait) {
  auto raw = RawClient::connect(port_);
  ASSERT_NE(raw, nullptr);
  ASSERT_TRUE(raw->handshake().ok());
  const std::string batch = rendezvous::encode_set("p", "1") + rendezvous::encode_wait({"q"}, 50) +
                            rendezvous::encode_get("p") + rendezvous::encode_add("c", 2);
  ASSERT_TRUE(raw->send(batch).ok());
  auto set = raw->read_frame();
  auto wait = raw->read_frame();
  auto get = raw->read_frame();
  auto add = raw->read_frame();
  ASSERT_TRUE(set.ok() && wait.ok() && get.ok() && add.ok());
  EXPECT_EQ(set->op, static_cast<std::uint8_t>(Opcode::kOk));
  ASSERT_EQ(wait->op, static_cast<std::uint8_t>(Opcode::kWaitTimeout));
  EXPECT_EQ(*rendezvous::decode_wait_timeout(wait->payload), std::vector<std::string>{"q"});
  EXPECT_EQ(get->op, static_cast<std::uint8_t>(Opcode::kOk));
  EXPECT_EQ(get->payload, "1");
  EXPECT_EQ(*rendezvous::decode_ok_i64(add->payload), 2);
}

TEST_F(StoreTest, AWaiterThatDisconnectsIsForgotten) {
  auto raw = RawClient::connect(port_);
  ASSERT_NE(raw, nullptr);
  ASSERT_TRUE(raw->handshake().ok());
  ASSERT_TRUE(raw->send(rendezvous::encode_wait({"later"}, 60000)).ok());
  raw.reset();
  auto store = connect();
  ASSERT_NE(store, nullptr);
  std::this_thread::sleep_for(milliseconds{20});
  ASSERT_TRUE(store->set("later", "x").ok());
  expect_store_serves("after-gone-waiter");
}

TEST_F(StoreTest, BadAndGoodClientsAtOnce) {
  constexpr int kEach = 12;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(2 * kEach);
  for (int i = 0; i < kEach; ++i) {
    threads.emplace_back([&, i] {
      StoreOptions wrong = test_options();
      wrong.secret = "wrong-" + std::to_string(i);
      auto refused = Store::connect("127.0.0.1", port_, wrong, i);
      if (refused.status().code() != StatusCode::kAuthFailed) {
        errors[i] = "bad client: " + refused.status().to_string();
      }
      auto raw = RawClient::connect(port_);
      if (raw == nullptr || !raw->send(std::string(64, '\xff')).ok() ||
          !raw->read_until_closed().ok()) {
        errors[i] += " garbage client not closed";
      }
    });
    threads.emplace_back([&, i] {
      auto store = Store::connect("127.0.0.1", port_, test_options(), i);
      Status s = store.status();
      for (int j = 0; s.ok() && j < 50; ++j) s = (*store)->add("good", 1).status();
      if (!s.ok()) errors[kEach + i] = "good client: " + s.to_string();
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  auto store = connect();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->get("good"), std::to_string(kEach * 50));
  const StoreServerStats stats = server_->stats();
  EXPECT_EQ(stats.auth_failures, std::uint64_t{kEach});
  EXPECT_EQ(stats.protocol_errors, std::uint64_t{kEach});
  EXPECT_EQ(stats.accepted, std::uint64_t{kEach} + 1);
}

}  // namespace
}  // namespace hoop::testing
