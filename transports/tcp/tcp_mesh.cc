#include "transports/tcp/tcp_mesh.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "core/crypto.h"
#include "core/log.h"
#include "core/socket.h"
#include "transports/tcp/tcp_wire.h"

namespace hoop::tcp {
namespace {

using std::chrono::milliseconds;

// A connection that has not passed the handshake this long after it was accepted is dropped,
// so idle or stuck strangers cannot pile up on the listener.
constexpr milliseconds kAcceptedHandshakeTimeout{5000};

struct HandshakeFrame {
  wire::HandshakeType type;
  std::string payload;
};

// Reads one handshake frame without blocking and without reading past it, so that data
// frames a peer sends right after the handshake stay in the socket for the data path.
class HandshakeReader {
 public:
  Result<std::optional<HandshakeFrame>> read(int fd, std::string_view peer) {
    while (true) {
      char* dst;
      std::size_t want;
      if (header_got_ < wire::kHandshakeHeaderBytes) {
        dst = header_ + header_got_;
        want = wire::kHandshakeHeaderBytes - header_got_;
      } else {
        dst = payload_.data() + payload_got_;
        want = payload_.size() - payload_got_;
      }
      if (want > 0) {
        const ssize_t n = ::recv(fd, dst, want, MSG_DONTWAIT);
        if (n == 0) return peer_lost(fmt::format("{} closed the connection", peer));
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return std::optional<HandshakeFrame>();
          if (errno == ECONNRESET) return peer_lost(fmt::format("{} reset the connection", peer));
          return errno_error(fmt::format("reading from {}", peer), errno);
        }
        if (header_got_ < wire::kHandshakeHeaderBytes) {
          header_got_ += static_cast<std::size_t>(n);
          if (header_got_ < wire::kHandshakeHeaderBytes) continue;
          std::uint32_t length = 0;
          for (int i = 0; i < 4; ++i)
            length |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(header_[i])) << (8 * i);
          if (length > wire::kMaxHandshakePayload) {
            return protocol_error(fmt::format("{} sent a handshake frame of {} bytes (limit {})",
                                              peer, length, wire::kMaxHandshakePayload));
          }
          payload_.assign(length, '\0');
          payload_got_ = 0;
          continue;
        }
        payload_got_ += static_cast<std::size_t>(n);
        continue;
      }
      HandshakeFrame frame{static_cast<wire::HandshakeType>(header_[4]), std::move(payload_)};
      header_got_ = 0;
      payload_.clear();
      return std::optional<HandshakeFrame>(std::move(frame));
    }
  }

 private:
  char header_[wire::kHandshakeHeaderBytes] = {};
  std::size_t header_got_ = 0;
  std::string payload_;
  std::size_t payload_got_ = 0;
};

enum class Stage { kConnecting, kAwaitHello, kAwaitProof, kAwaitClientHello, kSendingProof };

struct Pending {
  Fd fd;
  bool client = false;
  Stage stage = Stage::kConnecting;
  int peer = -1;  // client: the rank dialled; server: the rank claimed once known
  int index = 0;
  std::string address;
  std::string nonce;  // this side's
  std::string expected_proof;
  net::WriteQueue out;
  HandshakeReader in;
  net::Deadline deadline;
  bool done = false;     // authenticated, ready to hand over
  bool dropped = false;  // server side: refused or broken
};

struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
};

Result<Endpoint> parse_endpoint(const std::string& value, int rank) {
  const std::size_t colon = value.rfind(':');
  std::uint32_t port = 0;
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < value.size();
  for (std::size_t i = colon + 1; ok && i < value.size(); ++i) {
    ok = value[i] >= '0' && value[i] <= '9' && (port = port * 10 + (value[i] - '0')) <= 65535;
  }
  if (!ok || port == 0) {
    return protocol_error(fmt::format("rank {} published a malformed address '{}'", rank, value));
  }
  std::string host = value.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return Endpoint{host, static_cast<std::uint16_t>(port)};
}

std::string key_for(const MeshParams& p, int rank) {
  return fmt::format("{}/{}", p.options.key_prefix, rank);
}

// Starts a non-blocking connection to `ep`; the socket is tuned before connecting so that
// window scaling is negotiated for the large buffers.
Result<Fd> start_connect(const Endpoint& ep, std::size_t buffer_bytes) {
  HOOP_ASSIGN_OR_RETURN(auto addrs, net::resolve(ep.host, ep.port));
  const net::SocketAddress& addr = addrs.front();
  Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno_error("socket", errno);
  HOOP_RETURN_IF_ERROR(tune_socket(fd.get(), buffer_bytes));
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0 &&
      errno != EINPROGRESS) {
    return errno_error(fmt::format("could not connect to {}", addr.to_string()), errno);
  }
  return fd;
}

class MeshBuilder {
 public:
  MeshBuilder(Store& store, const MeshParams& params) : store_(store), p_(params) {}

  Result<std::vector<PeerSocket>> run() {
    const int k = p_.options.sockets_per_peer;
    deadline_ = net::deadline_after(p_.options.connect_timeout);
    HOOP_ASSIGN_OR_RETURN(const std::string host, choose_bind_address(p_.options.iface));
    HOOP_ASSIGN_OR_RETURN(listener_, net::listen_tcp(host, 0));
    // Accepted sockets inherit the listener's buffer sizes from their first SYN on.
    HOOP_RETURN_IF_ERROR(tune_socket(listener_.fd.get(), p_.options.socket_buffer_bytes));
    HOOP_RETURN_IF_ERROR(
        store_.set(key_for(p_, p_.rank), net::format_host_port(host, listener_.port)));
    HOOP_RETURN_IF_ERROR(dial_lower_ranks());
    const std::size_t expected = p_.peer_list().size() * k;
    while (established_.size() < expected) HOOP_RETURN_IF_ERROR(poll_once());
    listener_.fd.reset();
    return std::move(established_);
  }

 private:
  Status dial_lower_ranks() {
    std::vector<std::string> keys;
    std::vector<int> lower;
    for (int r = 0; r < p_.rank; ++r) {
      if (p_.connects(r)) lower.push_back(r);
    }
    for (int r : lower) keys.push_back(key_for(p_, r));
    if (keys.empty()) return Status::success();
    HOOP_RETURN_IF_ERROR(store_.wait(keys, net::remaining(deadline_))
                             .with_context("tcp mesh: waiting for the lower ranks' addresses"));
    for (std::size_t j = 0; j < lower.size(); ++j) {
      const int r = lower[j];
      HOOP_ASSIGN_OR_RETURN(const std::string value, store_.get(keys[j]));
      HOOP_ASSIGN_OR_RETURN(const Endpoint ep, parse_endpoint(value, r));
      for (int i = 0; i < p_.options.sockets_per_peer; ++i) {
        auto fd = start_connect(ep, p_.options.socket_buffer_bytes);
        if (!fd.ok()) return fd.status().with_context(fmt::format("connecting to rank {}", r));
        Pending pending;
        pending.fd = std::move(fd).value();
        pending.client = true;
        pending.peer = r;
        pending.index = i;
        pending.address = net::format_host_port(ep.host, ep.port);
        pending.deadline = deadline_;
        pending_.push_back(std::move(pending));
      }
    }
    return Status::success();
  }

  Status poll_once() {
    const auto now = net::Clock::now();
    if (now >= deadline_) return timeout_status();
    std::vector<pollfd> fds;
    fds.push_back({listener_.fd.get(), POLLIN, 0});
    net::Deadline wake = deadline_;
    for (const Pending& q : pending_) {
      short events = q.stage == Stage::kConnecting ? POLLOUT : POLLIN;
      if (!q.out.empty()) events |= POLLOUT;
      fds.push_back({q.fd.get(), events, 0});
      wake = std::min(wake, q.deadline);
    }
    const auto ms = std::max<std::int64_t>(1, net::remaining(wake).count());
    const int rc =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::min<std::int64_t>(ms, 1000)));
    if (rc < 0 && errno != EINTR) return errno_error("poll", errno);
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      Pending& q = pending_[i];
      if (fds[i + 1].revents != 0) HOOP_RETURN_IF_ERROR(step(q));
      if (!q.done && !q.dropped && !q.client && net::Clock::now() >= q.deadline) {
        drop(q, protocol_error("did not complete the handshake in time"));
      }
    }
    if (fds[0].revents != 0) accept_all();
    for (Pending& q : pending_) {
      if (q.done) established_.push_back(PeerSocket{q.peer, q.index, std::move(q.fd), q.address});
    }
    std::erase_if(pending_, [](const Pending& q) { return q.done || q.dropped; });
    return Status::success();
  }

  void accept_all() {
    while (true) {
      Fd fd(::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          HOOP_LOG(kWarn, "tcp: rank {}: accept failed: {}", p_.rank, std::strerror(errno));
        return;
      }
      Pending q;
      q.address = net::peer_address(fd.get());
      q.fd = std::move(fd);
      q.stage = Stage::kAwaitClientHello;
      q.deadline = std::min(deadline_, net::deadline_after(kAcceptedHandshakeTimeout));
      auto nonce = crypto::random_bytes(wire::kNonceBytes);
      Status s = nonce.status();
      if (s.ok()) s = tune_socket(q.fd.get(), p_.options.socket_buffer_bytes);
      if (s.ok()) {
        q.nonce = *nonce;
        q.out.push(wire::encode_hello({wire::kProtocolVersion, p_.rank, q.nonce}));
        s = q.out.flush(q.fd.get(), q.address);
      }
      if (!s.ok()) {
        HOOP_LOG(kWarn, "tcp: rank {} dropped a connection from {}: {}", p_.rank, q.address,
                 s.to_string());
        continue;
      }
      pending_.push_back(std::move(q));
    }
  }

  // Server side: logs and closes a connection that failed; the set-up goes on.
  void drop(Pending& q, const Status& why) {
    q.dropped = true;
    if (q.peer >= 0) {
      HOOP_LOG(kWarn, "tcp: rank {} refused a connection from {} (claiming rank {}): {}", p_.rank,
               q.address, q.peer, why.to_string());
    } else {
      HOOP_LOG(kWarn, "tcp: rank {} dropped a connection from {}: {}", p_.rank, q.address,
               why.to_string());
    }
  }

  Status step(Pending& q) {
    if (q.client) {
      Status s = client_step(q);
      return s.with_context(
          fmt::format("tcp mesh: connecting to rank {} at {}", q.peer, q.address));
    }
    Status s = server_step(q);
    if (!s.ok()) {
      if (s.code() == StatusCode::kAuthFailed || s.code() == StatusCode::kProtocolError) {
        // Tell an honest peer of another configuration why; best effort, never waited for.
        q.out.push(wire::encode_refusal(s));
        (void)q.out.flush(q.fd.get(), q.address);
      }
      drop(q, s);
    }
    return Status::success();
  }

  Status client_step(Pending& q) {
    if (q.stage == Stage::kConnecting) {
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(q.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err == EINPROGRESS || err == EALREADY) return Status::success();
      if (err != 0) return errno_error("could not connect", err);
      q.stage = Stage::kAwaitHello;
    }
    HOOP_RETURN_IF_ERROR(q.out.flush(q.fd.get(), q.address));
    HOOP_ASSIGN_OR_RETURN(auto frame, q.in.read(q.fd.get(), q.address));
    if (!frame) return Status::success();
    if (frame->type == wire::HandshakeType::kRefuse) {
      const Status refusal = wire::decode_refusal(frame->payload);
      return Status(refusal.code(), "the peer refused this rank: " + refusal.message());
    }
    if (q.stage == Stage::kAwaitHello) {
      if (frame->type != wire::HandshakeType::kHello)
        return protocol_error("expected a hello as the first frame");
      HOOP_ASSIGN_OR_RETURN(const wire::Hello hello, wire::decode_hello(frame->payload));
      if (hello.rank != q.peer) {
        return auth_failed(
            fmt::format("the peer there is rank {}, not rank {}", hello.rank, q.peer));
      }
      HOOP_ASSIGN_OR_RETURN(q.nonce, crypto::random_bytes(wire::kNonceBytes));
      const wire::Transcript t{hello.nonce,
                               q.nonce,
                               p_.job_id,
                               p_.options.key_prefix,
                               p_.rank,
                               q.peer,
                               static_cast<std::uint32_t>(q.index)};
      HOOP_ASSIGN_OR_RETURN(const auto mine, wire::proof(wire::Role::kClient, p_.secret, t));
      HOOP_ASSIGN_OR_RETURN(const auto theirs, wire::proof(wire::Role::kServer, p_.secret, t));
      q.expected_proof = crypto::as_view(theirs);
      wire::ClientHello ch;
      ch.rank = p_.rank;
      ch.socket_index = static_cast<std::uint32_t>(q.index);
      ch.nonce = q.nonce;
      ch.job_id = p_.job_id;
      ch.mesh = p_.options.key_prefix;
      ch.proof = crypto::as_view(mine);
      q.out.push(wire::encode_client_hello(ch));
      q.stage = Stage::kAwaitProof;
      return q.out.flush(q.fd.get(), q.address);
    }
    if (frame->type != wire::HandshakeType::kProof)
      return protocol_error("expected the peer's proof");
    if (!crypto::constant_time_equal(frame->payload, q.expected_proof)) {
      return auth_failed("the peer failed to prove it knows the job secret");
    }
    q.done = true;
    return Status::success();
  }

  Status server_step(Pending& q) {
    HOOP_RETURN_IF_ERROR(q.out.flush(q.fd.get(), q.address));
    if (q.stage == Stage::kSendingProof) {
      q.done = q.out.empty();
      return Status::success();
    }
    HOOP_ASSIGN_OR_RETURN(auto frame, q.in.read(q.fd.get(), q.address));
    if (!frame) return Status::success();
    if (frame->type != wire::HandshakeType::kClientHello)
      return protocol_error("expected a client hello");
    HOOP_ASSIGN_OR_RETURN(const wire::ClientHello ch, wire::decode_client_hello(frame->payload));
    q.peer = ch.rank;
    if (ch.job_id != p_.job_id) {
      return auth_failed(fmt::format("job id mismatch: the peer is in job '{}', this rank in '{}'",
                                     ch.job_id, p_.job_id));
    }
    if (ch.mesh != p_.options.key_prefix) {
      return auth_failed(fmt::format("mesh mismatch: the peer joins '{}', this listener is '{}'",
                                     ch.mesh, p_.options.key_prefix));
    }
    const wire::Transcript t{q.nonce, ch.nonce, ch.job_id,      ch.mesh,
                             ch.rank, p_.rank,  ch.socket_index};
    HOOP_ASSIGN_OR_RETURN(const auto expected, wire::proof(wire::Role::kClient, p_.secret, t));
    if (!crypto::constant_time_equal(crypto::as_view(expected), ch.proof)) {
      return auth_failed("wrong job secret");
    }
    if (ch.rank <= p_.rank || ch.rank >= p_.size || !p_.connects(static_cast<int>(ch.rank)) ||
        ch.socket_index >= static_cast<std::uint32_t>(p_.options.sockets_per_peer)) {
      return protocol_error(fmt::format("rank {} socket {} is not expected to connect to rank {}",
                                        ch.rank, ch.socket_index, p_.rank));
    }
    q.index = static_cast<int>(ch.socket_index);
    for (const PeerSocket& s : established_) {
      if (s.peer == q.peer && s.index == q.index)
        return protocol_error(
            fmt::format("rank {} socket {} is already connected", q.peer, q.index));
    }
    HOOP_ASSIGN_OR_RETURN(const auto mine, wire::proof(wire::Role::kServer, p_.secret, t));
    q.out.push(wire::handshake_frame(wire::HandshakeType::kProof, crypto::as_view(mine)));
    q.stage = Stage::kSendingProof;
    HOOP_RETURN_IF_ERROR(q.out.flush(q.fd.get(), q.address));
    q.done = q.out.empty();
    return Status::success();
  }

  Status timeout_status() const {
    std::string missing;
    for (int r : p_.peer_list()) {
      int have = 0;
      for (const PeerSocket& s : established_) have += s.peer == r ? 1 : 0;
      if (have == p_.options.sockets_per_peer) continue;
      if (!missing.empty()) missing += ", ";
      missing +=
          fmt::format("rank {} ({})", r,
                      r < p_.rank ? "this rank's connection did not complete" : "did not connect");
    }
    return timeout_error(
        fmt::format("tcp mesh set-up on rank {} did not complete within {} ms; "
                    "missing: {}",
                    p_.rank, p_.options.connect_timeout.count(), missing));
  }

  Store& store_;
  const MeshParams& p_;
  net::Deadline deadline_;
  net::Listener listener_;
  std::vector<Pending> pending_;
  std::vector<PeerSocket> established_;
};

std::string interface_names(const ifaddrs* list) {
  std::set<std::string> names;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) names.insert(a->ifa_name);
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

bool is_link_local6(const sockaddr* sa) {
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  return IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr);
}

}  // namespace

Result<std::string> choose_bind_address(const std::string& iface) {
  in_addr v4;
  in6_addr v6;
  if (::inet_pton(AF_INET, iface.c_str(), &v4) == 1 ||
      ::inet_pton(AF_INET6, iface.c_str(), &v6) == 1) {
    return iface;
  }
  if (iface.empty()) {
    HOOP_ASSIGN_OR_RETURN(std::optional<std::string> found, net::first_external_ipv4());
    return found.value_or("127.0.0.1");
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return errno_error("getifaddrs", errno);
  std::optional<std::string> v4_match, v6_match;
  bool named = false;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    if (std::string_view(a->ifa_name) != iface) continue;
    named = true;
    if (a->ifa_addr->sa_family == AF_INET && !v4_match) v4_match = address_text(a->ifa_addr);
    if (a->ifa_addr->sa_family == AF_INET6 && !v6_match && !is_link_local6(a->ifa_addr))
      v6_match = address_text(a->ifa_addr);
  }
  const std::string names = interface_names(list);
  ::freeifaddrs(list);
  if (v4_match) return *v4_match;
  if (v6_match) return *v6_match;
  if (named) {
    return invalid_argument(
        fmt::format("TCP interface '{}' (HOOP_IFACE) has no IPv4 or routable IPv6 address", iface));
  }
  return invalid_argument(fmt::format(
      "TCP interface '{}' (HOOP_IFACE) is neither an IP address nor a network interface of this "
      "host (interfaces: {})",
      iface, names));
}

Status tune_socket(int fd, std::size_t buffer_bytes) {
  const int bytes = static_cast<int>(std::min<std::size_t>(buffer_bytes, INT32_MAX));
  if (bytes > 0) {
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) != 0)
      return errno_error("setsockopt(SO_SNDBUF)", errno);
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) != 0)
      return errno_error("setsockopt(SO_RCVBUF)", errno);
  }
  return net::set_nodelay(fd);
}

bool MeshParams::connects(int peer) const {
  if (peer < 0 || peer >= size || peer == rank) return false;
  return options.peers.empty() ||
         std::binary_search(options.peers.begin(), options.peers.end(), peer);
}

std::vector<int> MeshParams::peer_list() const {
  std::vector<int> list;
  for (int r = 0; r < size; ++r) {
    if (connects(r)) list.push_back(r);
  }
  return list;
}

Result<std::vector<PeerSocket>> build_mesh(Store& store, const MeshParams& params) {
  if (params.peer_list().empty()) return std::vector<PeerSocket>();
  return MeshBuilder(store, params).run();
}

}  // namespace hoop::tcp
