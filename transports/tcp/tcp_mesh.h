// Connection set-up of the TCP transport: choosing the interface, listening, publishing the
// address, and the authenticated handshake of every connection (internal to transports/tcp).
#pragma once

#include <string>
#include <vector>

#include "core/fd.h"
#include "hoop/core.h"
#include "hoop/rendezvous.h"
#include "transports/tcp/tcp_transport.h"

namespace hoop::tcp {

/// One authenticated connection to a peer.
struct PeerSocket {
  int peer = -1;
  int index = 0;  // which of the peer's sockets_per_peer sockets
  Fd fd;          // non-blocking, TCP_NODELAY, buffers sized
  std::string address;
};

/// Who this rank is in the mesh being built.
struct MeshParams {
  int rank = 0;
  int size = 1;
  std::string secret;
  std::string job_id;
  TcpOptions options;

  /// Whether this rank connects to `peer` (options.peers, or every other rank).
  bool connects(int peer) const;
  /// The ranks this rank connects to, ascending.
  std::vector<int> peer_list() const;
};

/// The IP address to bind and advertise for `iface` (see TcpOptions::iface); invalid_argument
/// naming the interface and HOOP_IFACE when there is no such interface or it has no address.
Result<std::string> choose_bind_address(const std::string& iface);

/// Sets TCP_NODELAY and SO_SNDBUF/SO_RCVBUF of `fd` to `buffer_bytes`.
Status tune_socket(int fd, std::size_t buffer_bytes);

/// Listens, publishes this rank's address, connects to the lower ranks and accepts the higher
/// ones until every connection has passed the handshake or options.connect_timeout passes.
/// Returns the peer_list().size() * sockets_per_peer connections.
Result<std::vector<PeerSocket>> build_mesh(Store& store, const MeshParams& params);

}  // namespace hoop::tcp
