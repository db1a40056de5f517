// A loopback port that refuses connections, for tests of connecting to nothing.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

#include "core/fd.h"

namespace hoop::testing {

/// A loopback port bound by a socket that never listens: connecting to it is refused for as long
/// as `holder` lives, and no other process can bind it meanwhile. (A port bound and released at
/// once was taken by a concurrent test's store server under `ctest -j 4`, and the "closed" port
/// answered.)
struct ClosedPort {
  Fd holder;
  std::uint16_t port = 1;
};

/// Binds a fresh ClosedPort at `host`, an IPv4 loopback address (a failure is a test failure,
/// and leaves port 1).
inline ClosedPort closed_port(const char* host = "127.0.0.1") {
  ClosedPort closed{Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0))};
  EXPECT_GE(closed.holder.get(), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  EXPECT_EQ(::inet_pton(AF_INET, host, &addr.sin_addr), 1) << host;
  socklen_t len = sizeof addr;
  const bool bound =
      ::bind(closed.holder.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(closed.holder.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  EXPECT_TRUE(bound);
  if (bound) closed.port = ntohs(addr.sin_port);
  return closed;
}

}  // namespace hoop::testing
