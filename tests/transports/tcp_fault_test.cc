// The TCP transport's own failures: a wrong secret and garbage on a listener during set-up.
// The faults every transport shares (killed and stopped ranks) are in fault_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/socket.h"
#include "tests/transports/tcp_test_util.h"
#include "transports/tcp/tcp_wire.h"

namespace hoop::testing {
namespace {

namespace wire = tcp::wire;

using std::chrono::milliseconds;

std::uint16_t port_of(const std::string& host_port) {
  return static_cast<std::uint16_t>(std::stoi(host_port.substr(host_port.rfind(':') + 1)));
}

// Reads until the peer closes; false when it is still open after the test timeout.
bool closed_by_peer(int fd) {
  char c;
  const auto deadline = net::deadline_after(milliseconds{10000});
  while (true) {
    const Status s = net::read_exact(fd, &c, 1, deadline, "rank 0");
    if (s.code() == StatusCode::kPeerLost) return true;
    if (!s.ok()) return false;
  }
}

TEST_F(TcpTest, WrongSecretIsRefusedAndLogged) {
  ::testing::internal::CaptureStderr();
  Status rank0, rank1;
  std::thread t0([&] {
    tcp::TcpOptions o = loopback_options();
    o.connect_timeout = milliseconds{3000};
    rank0 = connect(0, 2, o).status();
  });
  std::thread t1([&] { rank1 = connect(1, 2, loopback_options(), "not-the-secret").status(); });
  t0.join();
  t1.join();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rank1.code(), StatusCode::kAuthFailed) << rank1.to_string();
  EXPECT_NE(rank1.message().find("rank 0"), std::string::npos) << rank1.message();
  EXPECT_NE(rank1.message().find("wrong job secret"), std::string::npos) << rank1.message();
  EXPECT_EQ(rank0.code(), StatusCode::kTimeout) << rank0.to_string();
  EXPECT_NE(rank0.message().find("rank 1"), std::string::npos) << rank0.message();
  EXPECT_NE(log.find("refused a connection from 127.0.0.1"), std::string::npos) << log;
  EXPECT_NE(log.find("wrong job secret"), std::string::npos) << log;
}

TEST_F(TcpTest, GarbageOnTheListenerDoesNotDisturbTheMesh) {
  ::testing::internal::CaptureStderr();
  Result<std::unique_ptr<Transport>> rank0 = internal_error("not run");
  std::thread t0([&] { rank0 = connect(0, 2, loopback_options()); });
  auto s = store(-1);
  ASSERT_NE(s, nullptr);
  auto addr = s->wait_get("hoop/tcp/0", milliseconds{10000});
  ASSERT_TRUE(addr.ok()) << addr.status().to_string();
  const std::uint16_t port = port_of(*addr);
  auto dial = [&] {
    auto fd = net::connect_tcp("127.0.0.1", port, net::deadline_after(milliseconds{5000}));
    EXPECT_TRUE(fd.ok()) << fd.status().to_string();
    return fd.ok() ? std::move(fd).value() : Fd();
  };
  auto send_all = [](const Fd& fd, std::string_view bytes) {
    return net::write_exact(fd.get(), bytes.data(), bytes.size(),
                            net::deadline_after(milliseconds{5000}), "rank 0");
  };
  // Random bytes.
  Fd garbage = dial();
  std::mt19937 rng(7);
  std::string noise(4000, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  EXPECT_TRUE(send_all(garbage, noise).ok());
  // A frame header claiming 4 GiB.
  Fd oversized = dial();
  EXPECT_TRUE(send_all(oversized, std::string("\xff\xff\xff\xff\x02", 5)).ok());
  // A well-formed client hello for rank 1 with a forged proof.
  Fd forged = dial();
  wire::ClientHello hello;
  hello.rank = 1;
  hello.nonce = std::string(wire::kNonceBytes, 'n');
  hello.job_id = kTcpJobId;
  hello.mesh = "hoop/tcp";
  hello.proof = std::string(wire::kProofBytes, 'p');
  EXPECT_TRUE(send_all(forged, wire::encode_client_hello(hello)).ok());
  // A connection that never says anything.
  Fd idle = dial();

  auto rank1 = connect(1, 2, loopback_options());
  t0.join();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(rank0.ok()) << rank0.status().to_string();
  ASSERT_TRUE(rank1.ok()) << rank1.status().to_string();
  EXPECT_TRUE(closed_by_peer(garbage.get()));
  EXPECT_TRUE(closed_by_peer(oversized.get()));
  EXPECT_TRUE(closed_by_peer(forged.get()));
  EXPECT_NE(log.find("handshake frame of 4294967295 bytes"), std::string::npos) << log;
  EXPECT_NE(log.find("wrong job secret"), std::string::npos) << log;

  int v = 9, got = 0;
  auto a = (*rank0)->send(1, &v, sizeof v);
  auto b = (*rank1)->recv(0, &got, sizeof got);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(wait_one(**rank0, *a, test_deadline()).ok());
  EXPECT_TRUE(wait_one(**rank1, *b, test_deadline()).ok());
  EXPECT_EQ(got, 9);
}

}  // namespace
}  // namespace hoop::testing
