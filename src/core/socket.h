// Small RAII helpers over POSIX TCP sockets, shared by the rendezvous store and the TCP
// transport. Every blocking helper takes a deadline and waits with poll(), so nothing here
// can hang; every error is a Status that names the peer (host:port) and the system error.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/fd.h"
#include "hoop/core.h"

namespace hoop::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// The deadline `timeout` from now (saturating instead of overflowing for huge timeouts).
Deadline deadline_after(std::chrono::milliseconds timeout);
/// Milliseconds left until `deadline`, 0 when it has passed.
std::chrono::milliseconds remaining(Deadline deadline);

/// One resolved socket address.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  /// "1.2.3.4:80" or "[::1]:80".
  std::string to_string() const;
};

/// "host:port", with brackets around IPv6 literals.
std::string format_host_port(std::string_view host, std::uint16_t port);

/// Resolves `host:port` for TCP (getaddrinfo). An empty host with `passive` means every local
/// address (for listening). Errors name host:port and the resolver's reason.
Result<std::vector<SocketAddress>> resolve(const std::string& host, std::uint16_t port,
                                           bool passive = false);

/// A listening socket and the port it actually bound.
struct Listener {
  Fd fd;
  std::uint16_t port = 0;
};

/// Listens on `host:port` (port 0: an ephemeral port, reported in Listener::port). The socket
/// is non-blocking and close-on-exec; an empty host listens on every interface.
Result<Listener> listen_tcp(const std::string& host, std::uint16_t port, int backlog = 1024);

/// Connects to `host:port`, retrying while the peer refuses (not listening yet) until
/// `deadline`; then a timeout error naming host:port and the last cause. The socket returned
/// is blocking, close-on-exec, with TCP_NODELAY set.
Result<Fd> connect_tcp(const std::string& host, std::uint16_t port, Deadline deadline);

/// Switches O_NONBLOCK on or off.
Status set_nonblocking(int fd, bool nonblocking = true);
/// Disables Nagle's algorithm so small messages leave at once.
Status set_nodelay(int fd);

/// Reads exactly `size` bytes before `deadline`. `peer` names the other side in errors
/// (e.g. "store at host:port"); a closed or reset connection is peer_lost. Works on blocking
/// and non-blocking sockets alike.
Status read_exact(int fd, void* data, std::size_t size, Deadline deadline, std::string_view peer);
/// Writes exactly `size` bytes before `deadline` (never raises SIGPIPE); errors as read_exact.
Status write_exact(int fd, const void* data, std::size_t size, Deadline deadline,
                   std::string_view peer);

/// Bytes received on a non-blocking socket and not consumed yet. It grows only as bytes
/// arrive, so a length a peer merely claims never decides how much is allocated.
class ReadBuffer {
 public:
  /// Receives at most `max` bytes from `fd` without blocking; returns how many arrived (0:
  /// none for now). peer_lost when the peer closed or reset the connection.
  Result<std::size_t> receive(int fd, std::size_t max, std::string_view peer);
  /// The received bytes not consumed yet; valid until the next receive().
  std::string_view view() const { return {buf_.data() + begin_, end_ - begin_}; }
  /// Number of bytes not consumed yet.
  std::size_t size() const { return end_ - begin_; }
  /// Marks the first `n` unconsumed bytes as used; frees a large buffer once it is empty.
  void consume(std::size_t n);

 private:
  std::vector<char> buf_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

/// Byte strings waiting to be sent, in order, on a non-blocking socket.
class WriteQueue {
 public:
  /// Queues `bytes` after everything queued before.
  void push(std::string bytes);
  /// Sends as much as `fd` takes without blocking (never raises SIGPIPE); peer_lost when
  /// the peer is gone.
  Status flush(int fd, std::string_view peer);
  /// Bytes queued and not sent yet.
  std::size_t pending() const { return pending_; }
  /// Whether everything queued has been sent.
  bool empty() const { return chunks_.empty(); }

 private:
  std::deque<std::string> chunks_;
  std::size_t offset_ = 0;  // bytes of chunks_.front() already sent
  std::size_t pending_ = 0;
};

/// The first IPv4 address of a network interface that is up and not loopback, skipping local
/// container and VM bridges (docker*, virbr*) that other hosts cannot reach; nullopt when there
/// is none. The address other hosts are most likely to reach this one at.
Result<std::optional<std::string>> first_external_ipv4();

/// The remote address of a connected socket ("1.2.3.4:5678"), or "<unknown peer>".
std::string peer_address(int fd);
/// The local port a socket is bound to.
Result<std::uint16_t> local_port(int fd);

}  // namespace hoop::net
