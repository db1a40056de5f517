// Shared pieces of the store tests: a fixture with a running server on 127.0.0.1, and a raw
// socket client that speaks (or deliberately breaks) the wire protocol byte by byte.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/socket.h"
#include "hoop/rendezvous.h"
#include "rendezvous/store_protocol.h"

namespace hoop::testing {

inline constexpr std::chrono::milliseconds kTestTimeout{10000};
inline constexpr const char* kSecret = "test-secret-0123456789";
inline constexpr const char* kJobId = "job-42";

/// Options every test store uses unless it says otherwise.
inline StoreOptions test_options() {
  StoreOptions options;
  options.secret = kSecret;
  options.job_id = kJobId;
  options.timeout = kTestTimeout;
  return options;
}

/// Polls `condition` until it holds or `timeout` passes; returns its last value.
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = kTestTimeout) {
  const auto deadline = net::deadline_after(timeout);
  while (!condition()) {
    if (net::Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return true;
}

/// A frame as read by RawClient.
struct RawFrame {
  std::uint8_t op = 0;
  std::string payload;
};

/// A client on a plain socket, for sending what a well-behaved client never would.
class RawClient {
 public:
  /// Connects to 127.0.0.1:`port` (no handshake).
  static std::unique_ptr<RawClient> connect(std::uint16_t port) {
    auto fd = net::connect_tcp("127.0.0.1", port, net::deadline_after(kTestTimeout));
    EXPECT_TRUE(fd.ok()) << fd.status().to_string();
    if (!fd.ok()) return nullptr;
    return std::unique_ptr<RawClient>(new RawClient(std::move(fd).value()));
  }

  /// Wraps an already connected socket (e.g. the server side of a fake store).
  static std::unique_ptr<RawClient> adopt(Fd fd) {
    return std::unique_ptr<RawClient>(new RawClient(std::move(fd)));
  }

  /// Sends raw bytes.
  Status send(std::string_view bytes) {
    return net::write_exact(fd_.get(), bytes.data(), bytes.size(),
                            net::deadline_after(kTestTimeout), "test store");
  }

  /// Reads one frame of at most `cap` payload bytes.
  Result<RawFrame> read_frame(std::size_t cap = std::size_t{128} << 20) {
    char header[rendezvous::kFrameHeaderBytes];
    const auto deadline = net::deadline_after(kTestTimeout);
    HOOP_RETURN_IF_ERROR(net::read_exact(fd_.get(), header, sizeof header, deadline, "store"));
    const auto h = rendezvous::decode_header(header);
    if (h.length > cap) return protocol_error("test: frame too large");
    RawFrame frame{h.op, std::string(h.length, '\0')};
    HOOP_RETURN_IF_ERROR(
        net::read_exact(fd_.get(), frame.payload.data(), h.length, deadline, "store"));
    return frame;
  }

  /// Reads until the server closes the connection (or resets it); everything received
  /// before that, or a timeout error.
  Result<std::string> read_until_closed() {
    std::string got;
    char buf[65536];
    const auto deadline = net::deadline_after(kTestTimeout);
    while (true) {
      Status s = net::read_exact(fd_.get(), buf, 1, deadline, "store");
      if (s.code() == StatusCode::kPeerLost) return got;
      HOOP_RETURN_IF_ERROR(s);
      got.push_back(buf[0]);
    }
  }

  /// Runs the client side of the handshake by hand, speaking `version`. Returns the
  /// server's answer frame (kServerProof when accepted).
  Result<RawFrame> handshake(std::string_view secret = kSecret, std::string_view job_id = kJobId,
                             std::uint32_t version = rendezvous::kProtocolVersion) {
    HOOP_ASSIGN_OR_RETURN(RawFrame hello_frame, read_frame());
    HOOP_ASSIGN_OR_RETURN(auto server_hello, rendezvous::decode_server_hello(hello_frame.payload));
    rendezvous::ClientHello hello;
    hello.version = version;
    hello.rank = 7;
    hello.nonce = std::string(rendezvous::kNonceBytes, 'n');
    hello.job_id = job_id;
    const rendezvous::HandshakeTranscript transcript{version, server_hello.nonce, hello.nonce,
                                                     hello.job_id, hello.rank};
    HOOP_ASSIGN_OR_RETURN(auto proof, rendezvous::handshake_proof(rendezvous::ProofRole::kClient,
                                                                  secret, transcript));
    hello.proof = crypto::as_view(proof);
    HOOP_RETURN_IF_ERROR(send(rendezvous::encode_client_hello(hello)));
    return read_frame();
  }

  /// The socket, for tests that poke it directly.
  int fd() const { return fd_.get(); }

 private:
  explicit RawClient(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
};

/// A fixture with one running store server.
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { start_server(test_options()); }

  /// (Re)starts the server with `options`.
  void start_server(StoreOptions options) {
    server_.reset();
    auto server = StoreServer::start("127.0.0.1", 0, std::move(options));
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(server).value();
    port_ = server_->port();
  }

  /// A connected, authenticated client; fails the test otherwise.
  std::unique_ptr<Store> connect(StoreOptions options = test_options(), int rank = -1) {
    auto store = Store::connect("127.0.0.1", port_, std::move(options), rank);
    EXPECT_TRUE(store.ok()) << store.status().to_string();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  /// Checks that a fresh client can still use the store.
  void expect_store_serves(std::string_view tag) {
    auto store = connect();
    ASSERT_NE(store, nullptr);
    const std::string key = "alive/" + std::string(tag);
    ASSERT_TRUE(store->set(key, "yes").ok());
    auto value = store->get(key);
    ASSERT_TRUE(value.ok()) << value.status().to_string();
    EXPECT_EQ(*value, "yes");
  }

  std::unique_ptr<StoreServer> server_;
  std::uint16_t port_ = 0;
};

}  // namespace hoop::testing
