#include "core/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace hoop::net {
namespace {

// First and largest pause between connection attempts while the peer is not listening yet.
constexpr std::chrono::milliseconds kFirstRetryPause{5};
constexpr std::chrono::milliseconds kMaxRetryPause{200};
// A read buffer grown past this for one large message is freed once it is empty again.
constexpr std::size_t kKeepReadBufferBytes = std::size_t{64} << 10;

// Errors after which the peer may still come up (not listening yet, backlog full, a
// transient routing hiccup while a job starts); anything else is reported at once.
bool connect_error_is_transient(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ECONNABORTED || err == ETIMEDOUT ||
         err == EAGAIN || err == EINTR;
}

int poll_timeout_ms(Deadline deadline) {
  const auto left = remaining(deadline).count();
  return static_cast<int>(std::min<std::int64_t>(left, 1 << 30));
}

// Waits until `fd` is ready for `events`; false once `deadline` passes.
Result<bool> wait_ready(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (Clock::now() >= deadline) return false;
      continue;  // poll rounds down; wait out the last fraction of a millisecond
    }
    if (errno != EINTR) return errno_error("poll", errno);
  }
}

// One attempt to connect to `addr`; the error number on failure (0 on success, -1 on
// deadline).
int connect_once(const SocketAddress& addr, Deadline deadline, Fd& out, Status& hard_error) {
  Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0) {
    if (errno != EINPROGRESS) return errno;
    auto ready = wait_ready(fd.get(), POLLOUT, deadline);
    if (!ready.ok()) {
      hard_error = ready.status();
      return EIO;
    }
    if (!*ready) return -1;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    if (err != 0) return err;
  }
  out = std::move(fd);
  return 0;
}

std::string errno_text(int err) {
  char buf[128];
  return ::strerror_r(err, buf, sizeof buf);
}

}  // namespace

Deadline deadline_after(std::chrono::milliseconds timeout) {
  const auto now = Clock::now();
  if (timeout.count() <= 0) return now;
  const auto headroom =
      std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::max() - now);
  if (timeout >= headroom) return Deadline::max();
  return now + timeout;
}

std::chrono::milliseconds remaining(Deadline deadline) {
  const auto now = Clock::now();
  if (now >= deadline) return std::chrono::milliseconds{0};
  return std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
}

std::string SocketAddress::to_string() const {
  char host[INET6_ADDRSTRLEN] = {};
  if (storage.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return format_host_port(host, ntohs(in->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return format_host_port(host, ntohs(in6->sin6_port));
  }
  return fmt::format("<address family {}>", storage.ss_family);
}

std::string format_host_port(std::string_view host, std::uint16_t port) {
  if (host.find(':') != std::string_view::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Result<std::vector<SocketAddress>> resolve(const std::string& host, std::uint16_t port,
                                           bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  addrinfo* list = nullptr;
  const int rc =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  const std::string where = format_host_port(host.empty() ? "*" : host, port);
  if (rc != 0) {
    if (rc == EAI_SYSTEM) return errno_error(fmt::format("could not resolve {}", where), errno);
    return io_error(fmt::format("could not resolve {}: {}", where, ::gai_strerror(rc)));
  }
  std::vector<SocketAddress> out;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SocketAddress addr;
    std::memcpy(&addr.storage, ai->ai_addr, ai->ai_addrlen);
    addr.length = ai->ai_addrlen;
    out.push_back(addr);
  }
  ::freeaddrinfo(list);
  if (out.empty()) return io_error(fmt::format("could not resolve {}: no TCP address", where));
  return out;
}

Result<Listener> listen_tcp(const std::string& host, std::uint16_t port, int backlog) {
  HOOP_ASSIGN_OR_RETURN(auto addrs, resolve(host, port, /*passive=*/true));
  const std::string where = format_host_port(host.empty() ? "*" : host, port);
  Status last;
  for (const SocketAddress& addr : addrs) {
    Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      last = errno_error(fmt::format("could not create a socket to listen on {}", where), errno);
      continue;
    }
    // Lets a restarted server bind again while old connections sit in TIME_WAIT.
    const int one = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
      return errno_error(fmt::format("setsockopt(SO_REUSEADDR) for {}", where), errno);
    }
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0) {
      last = errno_error(fmt::format("could not bind {}", addr.to_string()), errno);
      continue;
    }
    if (::listen(fd.get(), backlog) != 0) {
      last = errno_error(fmt::format("could not listen on {}", addr.to_string()), errno);
      continue;
    }
    HOOP_ASSIGN_OR_RETURN(const std::uint16_t bound, local_port(fd.get()));
    return Listener{std::move(fd), bound};
  }
  return last;
}

Result<Fd> connect_tcp(const std::string& host, std::uint16_t port, Deadline deadline) {
  const std::string where = format_host_port(host, port);
  const auto budget = remaining(deadline);
  auto pause = kFirstRetryPause;
  std::string last_cause = "no attempt made";
  while (true) {
    auto addrs = resolve(host, port);
    if (addrs.ok()) {
      for (const SocketAddress& addr : *addrs) {
        Fd fd;
        Status hard;
        const int err = connect_once(addr, deadline, fd, hard);
        if (err == 0) {
          HOOP_RETURN_IF_ERROR(set_nonblocking(fd.get(), false));
          HOOP_RETURN_IF_ERROR(set_nodelay(fd.get()));
          return fd;
        }
        if (!hard.ok()) return hard.with_context(fmt::format("connecting to {}", where));
        if (err == -1) {
          last_cause = "connection attempt did not complete";
        } else if (connect_error_is_transient(err)) {
          last_cause = errno_text(err);
        } else {
          return errno_error(fmt::format("could not connect to {}", where), err);
        }
      }
    } else {
      // A name that does not resolve yet (EAI_AGAIN, DNS coming up) is retried like a
      // refused connection; its message names host:port already.
      last_cause = addrs.status().message();
    }
    const auto left = remaining(deadline);
    if (left.count() == 0) {
      return timeout_error(fmt::format("could not connect to {} within {} ms: {}", where,
                                       budget.count(), last_cause));
    }
    std::this_thread::sleep_for(std::min(pause, left));
    pause = std::min(pause * 2, kMaxRetryPause);
  }
}

Status set_nonblocking(int fd, bool nonblocking) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return errno_error("fcntl(F_GETFL)", errno);
  const int wanted = nonblocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (wanted != flags && ::fcntl(fd, F_SETFL, wanted) != 0) {
    return errno_error("fcntl(F_SETFL, O_NONBLOCK)", errno);
  }
  return Status::success();
}

Status set_nodelay(int fd) {
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    return errno_error("setsockopt(TCP_NODELAY)", errno);
  }
  return Status::success();
}

Status read_exact(int fd, void* data, std::size_t size, Deadline deadline, std::string_view peer) {
  auto* p = static_cast<char*>(data);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::recv(fd, p + got, size - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      return peer_lost(
          fmt::format("{} closed the connection (received {} of {} bytes)", peer, got, size));
    }
    if (errno == EINTR) continue;
    if (errno == ECONNRESET)
      return peer_lost(fmt::format("{} closed the connection abruptly (reset)", peer));
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return errno_error(fmt::format("reading from {}", peer), errno);
    }
    HOOP_ASSIGN_OR_RETURN(const bool ready, wait_ready(fd, POLLIN, deadline));
    if (!ready) {
      return timeout_error(fmt::format(
          "{} sent nothing before the deadline (received {} of {} bytes)", peer, got, size));
    }
  }
  return Status::success();
}

Status write_exact(int fd, const void* data, std::size_t size, Deadline deadline,
                   std::string_view peer) {
  const auto* p = static_cast<const char*>(data);
  std::size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, p + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) {
      return peer_lost(
          fmt::format("{} closed the connection (sent {} of {} bytes)", peer, sent, size));
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return errno_error(fmt::format("writing to {}", peer), errno);
    }
    HOOP_ASSIGN_OR_RETURN(const bool ready, wait_ready(fd, POLLOUT, deadline));
    if (!ready) {
      return timeout_error(fmt::format(
          "{} did not take data before the deadline (sent {} of {} bytes)", peer, sent, size));
    }
  }
  return Status::success();
}

Result<std::size_t> ReadBuffer::receive(int fd, std::size_t max, std::string_view peer) {
  if (buf_.size() - end_ < max) {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() - end_ < max) buf_.resize(end_ + max);
  }
  while (true) {
    const ssize_t n = ::recv(fd, buf_.data() + end_, max, MSG_DONTWAIT);
    if (n > 0) {
      end_ += static_cast<std::size_t>(n);
      return static_cast<std::size_t>(n);
    }
    if (n == 0) return peer_lost(fmt::format("{} closed the connection", peer));
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::size_t{0};
    if (errno == ECONNRESET)
      return peer_lost(fmt::format("{} closed the connection abruptly (reset)", peer));
    return errno_error(fmt::format("reading from {}", peer), errno);
  }
}

void ReadBuffer::consume(std::size_t n) {
  begin_ += std::min(n, end_ - begin_);
  if (begin_ < end_) return;
  begin_ = end_ = 0;
  if (buf_.capacity() > kKeepReadBufferBytes) std::vector<char>().swap(buf_);
}

void WriteQueue::push(std::string bytes) {
  if (bytes.empty()) return;
  pending_ += bytes.size();
  chunks_.push_back(std::move(bytes));
}

Status WriteQueue::flush(int fd, std::string_view peer) {
  while (!chunks_.empty()) {
    const std::string& front = chunks_.front();
    const ssize_t n =
        ::send(fd, front.data() + offset_, front.size() - offset_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EPIPE || errno == ECONNRESET) {
        return peer_lost(fmt::format("{} closed the connection", peer));
      }
      return errno_error(fmt::format("writing to {}", peer), errno);
    }
    offset_ += static_cast<std::size_t>(n);
    pending_ -= static_cast<std::size_t>(n);
    if (offset_ == front.size()) {
      chunks_.pop_front();
      offset_ = 0;
    }
  }
  return Status::success();
}

Result<std::optional<std::string>> first_external_ipv4() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return errno_error("getifaddrs", errno);
  std::optional<std::string> found;
  for (const ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const std::string_view name = a->ifa_name;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0 ||
        name.starts_with("docker") || name.starts_with("virbr")) {
      continue;
    }
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof text);
    found = text;
  }
  ::freeifaddrs(list);
  return found;
}

std::string peer_address(int fd) {
  SocketAddress addr;
  addr.length = sizeof addr.storage;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr.storage), &addr.length) != 0) {
    return "<unknown peer>";
  }
  return addr.to_string();
}

Result<std::uint16_t> local_port(int fd) {
  SocketAddress addr;
  addr.length = sizeof addr.storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr.storage), &addr.length) != 0) {
    return errno_error("getsockname", errno);
  }
  if (addr.storage.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr.storage)->sin_port);
  }
  if (addr.storage.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr.storage)->sin6_port);
  }
  return invalid_argument("local_port: not a TCP socket");
}

}  // namespace hoop::net
