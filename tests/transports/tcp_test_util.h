// Shared pieces of the transport tests: a store server on 127.0.0.1 (in this process or in a
// child process), byte patterns, and a runner that gives each of N threads its own rank and
// TCP transport.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hoop/rendezvous.h"
#include "hoop/transport.h"
#include "transports/tcp/tcp_transport.h"

namespace hoop::testing {

inline constexpr const char* kTcpSecret = "tcp-test-secret-0123456789";
inline constexpr const char* kTcpJobId = "tcp-job-1";
inline constexpr std::chrono::seconds kTcpTestTimeout{30};

/// The deadline every wait in the tests uses: generous, so only a hang would reach it.
inline Deadline test_deadline(std::chrono::milliseconds d = kTcpTestTimeout) {
  return Clock::now() + d;
}

/// Options for loopback meshes with a bounded set-up.
inline tcp::TcpOptions loopback_options(int sockets_per_peer = 1) {
  tcp::TcpOptions o;
  o.iface = "127.0.0.1";
  o.sockets_per_peer = sockets_per_peer;
  o.connect_timeout = std::chrono::milliseconds{20000};
  return o;
}

/// A byte pattern that differs per (source, destination, message, position).
inline std::uint8_t pattern_byte(int src, int dst, std::size_t msg, std::size_t i) {
  return static_cast<std::uint8_t>((src * 131 + dst * 31 + msg * 7 + i * 13 + (i >> 8)) & 0xff);
}

/// Fills `buf` with the pattern for (src, dst, msg).
inline void fill_pattern(std::vector<std::uint8_t>& buf, int src, int dst, std::size_t msg) {
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = pattern_byte(src, dst, msg, i);
}

/// Index of the first byte that differs from the pattern, or -1.
inline std::int64_t pattern_mismatch(const std::vector<std::uint8_t>& buf, int src, int dst,
                                     std::size_t msg) {
  for (std::size_t i = 0; i < buf.size(); ++i)
    if (buf[i] != pattern_byte(src, dst, msg, i)) return static_cast<std::int64_t>(i);
  return -1;
}

/// The store settings of every transport test.
inline StoreOptions test_store_options() {
  StoreOptions o;
  o.secret = kTcpSecret;
  o.job_id = kTcpJobId;
  o.timeout = std::chrono::milliseconds{20000};
  return o;
}

// Runs a store server in a child process and returns its port, so that the test process
// stays single-threaded and can fork ranks safely (a fork while another thread holds a lock,
// e.g. inside OpenSSL, would leave the child deadlocked).
inline std::uint16_t start_store_process(pid_t& pid) {
  int fds[2];
  if (::pipe(fds) != 0) return 0;
  pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    auto server = StoreServer::start("127.0.0.1", 0, test_store_options());
    const std::uint16_t port = server.ok() ? (*server)->port() : 0;
    (void)!::write(fds[1], &port, sizeof port);
    while (true) ::pause();
  }
  ::close(fds[1]);
  std::uint16_t port = 0;
  pollfd p{fds[0], POLLIN, 0};
  if (::poll(&p, 1, 10000) == 1 && ::read(fds[0], &port, sizeof port) != sizeof port) port = 0;
  ::close(fds[0]);
  return port;
}

/// A fixture with one running store server.
class TcpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = StoreServer::start("127.0.0.1", 0, store_options());
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(server).value();
  }

  static StoreOptions store_options() { return test_store_options(); }

  /// A store client for `rank`.
  std::unique_ptr<Store> store(int rank) {
    auto s = Store::connect("127.0.0.1", server_->port(), store_options(), rank);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  /// Connects rank `rank` of `size` and returns its transport or the set-up error.
  Result<std::unique_ptr<Transport>> connect(int rank, int size, const tcp::TcpOptions& o,
                                             const std::string& secret = kTcpSecret) {
    auto s = store(rank);
    if (s == nullptr) return internal_error("no store");
    return tcp::connect_mesh(*s, rank, size, secret, kTcpJobId, o);
  }

  /// Runs `body` on `size` threads, each with its own connected rank.
  void run_ranks(int size, const tcp::TcpOptions& o,
                 const std::function<void(int, Transport&)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        auto t = connect(r, size, o);
        ASSERT_TRUE(t.ok()) << "rank " << r << ": " << t.status().to_string();
        body(r, **t);
      });
    }
    for (auto& t : threads) t.join();
  }

  std::unique_ptr<StoreServer> server_;
};

}  // namespace hoop::testing
