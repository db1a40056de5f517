#include "core/socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "tests/core/closed_port.h"

namespace hoop::net {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kGenerous{10000};

// Accepts one connection on `listener` within a deadline.
Fd accept_one(const Listener& listener) {
  pollfd p{listener.fd.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(kGenerous.count())) != 1) return Fd();
  return Fd(::accept4(listener.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
}

struct ConnectedPair {
  Fd client;
  Fd server;
};

ConnectedPair connected_pair() {
  auto listener = listen_tcp("127.0.0.1", 0);
  EXPECT_TRUE(listener.ok()) << listener.status().to_string();
  if (!listener.ok()) return {};
  auto client = connect_tcp("127.0.0.1", listener->port, deadline_after(kGenerous));
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  if (!client.ok()) return {};
  return {std::move(client).value(), accept_one(*listener)};
}

TEST(Socket, FdClosesOnResetAndMovesOwnership) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[1]);
  Fd a(fds[0]);
  EXPECT_TRUE(a.valid());
  Fd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(b.get(), fds[0]);
  Fd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), fds[0]);
  c.reset();
  EXPECT_FALSE(c.valid());
  EXPECT_EQ(::fcntl(fds[0], F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);

  int more[2];
  ASSERT_EQ(::pipe(more), 0);
  Fd d(more[0]);
  const int raw = d.release();
  EXPECT_FALSE(d.valid());
  EXPECT_EQ(::fcntl(raw, F_GETFD) >= 0, true);
  ::close(raw);
  ::close(more[1]);
}

TEST(Socket, FormatsHostPortWithBracketsForIpv6) {
  EXPECT_EQ(format_host_port("10.0.0.1", 29500), "10.0.0.1:29500");
  EXPECT_EQ(format_host_port("::1", 80), "[::1]:80");
  EXPECT_EQ(format_host_port("node-3", 1), "node-3:1");
}

TEST(Socket, DeadlinesSaturateAndCountDown) {
  EXPECT_EQ(deadline_after(milliseconds::max()), Deadline::max());
  EXPECT_EQ(remaining(deadline_after(milliseconds{-5})).count(), 0);
  const auto left = remaining(deadline_after(milliseconds{60000}));
  EXPECT_GT(left.count(), 0);
  EXPECT_LE(left.count(), 60000);
}

TEST(Socket, ResolvesNumericAndLocalNames) {
  auto numeric = resolve("127.0.0.1", 80);
  ASSERT_TRUE(numeric.ok()) << numeric.status().to_string();
  EXPECT_EQ(numeric->front().to_string(), "127.0.0.1:80");
  auto local = resolve("localhost", 81);
  ASSERT_TRUE(local.ok()) << local.status().to_string();
  EXPECT_FALSE(local->empty());
}

TEST(Socket, ListenReportsTheEphemeralPortBound) {
  auto listener = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().to_string();
  EXPECT_NE(listener->port, 0);
  auto port = local_port(listener->fd.get());
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(*port, listener->port);
  // The port is taken now, so a second listener on it fails and says where.
  auto again = listen_tcp("127.0.0.1", listener->port);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find(std::to_string(listener->port)), std::string::npos)
      << again.status().message();
}

TEST(Socket, ReadsAndWritesExactlyAndNamesThePeer) {
  ConnectedPair pair = connected_pair();
  ASSERT_TRUE(pair.client.valid() && pair.server.valid());
  const std::string message(1 << 20, 'x');
  auto writer = std::async(std::launch::async, [&] {
    return write_exact(pair.client.get(), message.data(), message.size(), deadline_after(kGenerous),
                       "server");
  });
  std::string got(message.size(), '\0');
  ASSERT_TRUE(
      read_exact(pair.server.get(), got.data(), got.size(), deadline_after(kGenerous), "client")
          .ok());
  EXPECT_TRUE(writer.get().ok());
  EXPECT_EQ(got, message);
  const std::string peer = peer_address(pair.server.get());
  EXPECT_EQ(peer.rfind("127.0.0.1:", 0), 0u) << peer;
}

TEST(Socket, ReadTimesOutAtItsDeadline) {
  ConnectedPair pair = connected_pair();
  ASSERT_TRUE(pair.client.valid() && pair.server.valid());
  char buf[4];
  Status s =
      read_exact(pair.client.get(), buf, sizeof buf, deadline_after(milliseconds{100}), "peer X");
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find("peer X"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("0 of 4"), std::string::npos) << s.message();
}

TEST(Socket, ClosedPeerIsPeerLost) {
  ConnectedPair pair = connected_pair();
  ASSERT_TRUE(pair.client.valid() && pair.server.valid());
  ASSERT_TRUE(write_exact(pair.server.get(), "ab", 2, deadline_after(kGenerous), "c").ok());
  pair.server.reset();
  char buf[4];
  Status s = read_exact(pair.client.get(), buf, sizeof buf, deadline_after(kGenerous), "peer Y");
  EXPECT_EQ(s.code(), StatusCode::kPeerLost) << s.to_string();
  EXPECT_NE(s.message().find("peer Y closed the connection (received 2 of 4"), std::string::npos)
      << s.message();

  // Writing eventually notices too, without SIGPIPE killing the test.
  const std::string chunk(1 << 16, 'z');
  Status w;
  for (int i = 0; i < 1000 && w.ok(); ++i) {
    w = write_exact(pair.client.get(), chunk.data(), chunk.size(), deadline_after(kGenerous), "Y");
  }
  EXPECT_EQ(w.code(), StatusCode::kPeerLost) << w.to_string();
}

TEST(Socket, ConnectToAClosedPortTimesOutNamingIt) {
  const hoop::testing::ClosedPort closed = hoop::testing::closed_port();
  const std::uint16_t port = closed.port;
  auto fd = connect_tcp("127.0.0.1", port, deadline_after(milliseconds{300}));
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), StatusCode::kTimeout) << fd.status().to_string();
  const std::string msg = fd.status().message();
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
}

TEST(Socket, ConnectRetriesUntilTheListenerComesUp) {
  hoop::testing::ClosedPort closed = hoop::testing::closed_port();
  const std::uint16_t port = closed.port;
  auto connecting = std::async(std::launch::async, [port] {
    return connect_tcp("127.0.0.1", port, deadline_after(kGenerous));
  });
  // Give the first attempts a chance to be refused; correctness does not depend on it.
  std::this_thread::sleep_for(milliseconds{100});
  closed.holder.reset();
  auto listener = listen_tcp("127.0.0.1", port);
  ASSERT_TRUE(listener.ok()) << listener.status().to_string();
  auto fd = connecting.get();
  ASSERT_TRUE(fd.ok()) << fd.status().to_string();
  Fd accepted = accept_one(*listener);
  EXPECT_TRUE(accepted.valid());
  // connect_tcp hands back a blocking socket.
  EXPECT_EQ(::fcntl(fd->get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST(Socket, ReadBufferCollectsWhatArrivesAndReportsTheEnd) {
  ConnectedPair pair = connected_pair();
  ASSERT_TRUE(pair.client.valid() && pair.server.valid());
  ReadBuffer in;
  auto got = in.receive(pair.server.get(), 16, "peer Z");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, 0u);  // nothing sent yet: no blocking, no error
  ASSERT_TRUE(
      write_exact(pair.client.get(), "hello world", 11, deadline_after(kGenerous), "s").ok());
  const auto until = deadline_after(kGenerous);
  while (in.size() < 11 && Clock::now() < until) {
    ASSERT_TRUE(in.receive(pair.server.get(), 4, "peer Z").ok());  // at most 4 at a time
  }
  EXPECT_EQ(in.view(), "hello world");
  in.consume(6);
  EXPECT_EQ(in.view(), "world");
  in.consume(5);
  EXPECT_EQ(in.size(), 0u);
  pair.client.reset();
  Result<std::size_t> end = std::size_t{0};
  while (end.ok() && Clock::now() < until) end = in.receive(pair.server.get(), 16, "peer Z");
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), StatusCode::kPeerLost);
  EXPECT_NE(end.status().message().find("peer Z"), std::string::npos);
}

TEST(Socket, WriteQueueSendsInOrderWithoutBlocking) {
  ConnectedPair pair = connected_pair();
  ASSERT_TRUE(pair.client.valid() && pair.server.valid());
  ASSERT_TRUE(set_nonblocking(pair.client.get()).ok());
  WriteQueue out;
  // More than the socket buffers hold, so flush must stop short rather than block.
  const std::string chunk(1 << 20, 'q');
  for (int i = 0; i < 32; ++i) out.push(chunk);
  out.push("");  // ignored
  ASSERT_TRUE(out.flush(pair.client.get(), "server").ok());
  EXPECT_GT(out.pending(), 0u);
  std::string sink(1 << 20, '\0');
  std::size_t received = 0;
  const auto until = deadline_after(kGenerous);
  while (received < 32 * chunk.size() && Clock::now() < until) {
    ASSERT_TRUE(out.flush(pair.client.get(), "server").ok());
    const ssize_t n = ::recv(pair.server.get(), sink.data(), sink.size(), MSG_DONTWAIT);
    if (n > 0) received += static_cast<std::size_t>(n);
  }
  EXPECT_EQ(received, 32 * chunk.size());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(out.pending(), 0u);
}

TEST(Socket, SetNonblockingTogglesTheFlag) {
  ConnectedPair pair = connected_pair();
  ASSERT_TRUE(pair.client.valid());
  ASSERT_TRUE(set_nonblocking(pair.client.get()).ok());
  EXPECT_NE(::fcntl(pair.client.get(), F_GETFL) & O_NONBLOCK, 0);
  ASSERT_TRUE(set_nonblocking(pair.client.get(), false).ok());
  EXPECT_EQ(::fcntl(pair.client.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_TRUE(set_nodelay(pair.client.get()).ok());
  EXPECT_EQ(set_nonblocking(-1).code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace hoop::net
