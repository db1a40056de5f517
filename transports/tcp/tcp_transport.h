// The TCP transport: one rank's authenticated connections to every other rank of a job.
//
// Set-up (connect_mesh): each rank listens on the chosen interface only (ephemeral port),
// publishes "host:port" in the store under "<key_prefix>/<rank>", connects sockets_per_peer
// sockets to every LOWER rank and accepts them from every higher rank. Every connection opens
// with an HMAC-SHA256 handshake over the job secret that checks protocol version, job id,
// mesh (key prefix), ranks and socket index in both directions (see tcp_wire.h); a refused,
// garbage or stray connection on the listener is logged and dropped without disturbing the
// set-up. The listener is closed once the mesh is complete.
//
// Data path: non-blocking sockets in one epoll set, TCP_NODELAY, large socket buffers, no
// background thread. send()/recv() queue the request and try the socket at once; wait() and
// test() move bytes for every pending request of every peer. With sockets_per_peer > 1 each
// message is striped over all sockets of the peer (wire::stripe_part).
//
// Frames that arrive before their receive is posted are buffered (up to 4 x
// socket_buffer_bytes per socket, then the socket is left unread until a receive is posted),
// so ABORT and GOODBYE frames behind unclaimed data are still noticed. The exception is a
// kAwaited frame (send_awaited, send_lent) whose part is 64 KiB or more: its receiver posts the
// receive without waiting for the sender, so the socket is left unread from its header until
// then, and the payload is read once, straight into the receive buffer (what follows it is
// read then too). Each sendmsg and readv moves at most 256 KiB, and a rank that both sends and
// receives alternates between the two.
//
// Failure rules:
//  - a peer whose connection ends without a GOODBYE (crash, SIGKILL, reset, network loss) or
//    that sends a malformed frame: this rank aborts with peer_lost/protocol_error naming that
//    rank and its address (the whole job is broken; see abort below);
//  - a peer that shut down in order (GOODBYE, then end of stream): only requests on that
//    peer that can no longer complete fail, with peer_lost naming it;
//  - abort(cause), or a received ABORT: every pending and later request fails with the
//    cause, and an ABORT frame carrying it goes to every peer, which does the same once
//    (so every rank reports the first cause, e.g. "rank 2 ... closed the connection");
//  - a wait() whose deadline passes returns timeout_error naming the requests and peers still
//    outstanding, and aborts the transport with it: the requests are consumed, so their
//    buffers can no longer be used and their byte streams cannot be resumed;
//  - a receive whose length differs from the matching send fails with protocol_error naming
//    the peer and both lengths; the message's bytes are discarded and the stream goes on.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "hoop/rendezvous.h"
#include "hoop/transport.h"

namespace hoop::tcp {

/// How the TCP transport connects and sizes its sockets.
struct TcpOptions {
  /// Interface name ("eth0", "lo") or IP address to bind and advertise. Empty: the first
  /// interface that is up, not loopback and has an IPv4 address (docker* and virbr* skipped),
  /// else 127.0.0.1.
  std::string iface;
  /// Connections per pair of ranks; messages are striped over them.
  int sockets_per_peer = 1;
  /// SO_SNDBUF and SO_RCVBUF of every socket (the kernel caps them at net.core.*mem_max).
  std::size_t socket_buffer_bytes = std::size_t{4} << 20;
  /// Deadline for the whole mesh set-up, store look-ups included.
  std::chrono::milliseconds connect_timeout{30000};
  /// How long wait() keeps polling the sockets (yielding the core between polls) after bytes
  /// last moved, before it sleeps in epoll_wait: data that comes within this window skips the
  /// scheduler's wake-up latency.
  std::chrono::microseconds spin{200};
  /// Store key prefix of the mesh; several meshes (process sets) need distinct prefixes.
  std::string key_prefix = "hoop/tcp";
  /// The ranks to connect to (ascending, this rank excluded); empty: every other rank. A job
  /// whose ranks share hosts connects only the pairs on different hosts, and every rank must
  /// name the same pairs (rank a lists b exactly when b lists a).
  std::vector<int> peers;
};

/// Options from HOOP_IFACE, HOOP_TCP_SOCKETS_PER_PEER, HOOP_TCP_BUFFER_BYTES, HOOP_SPIN_US
/// and HOOP_START_TIMEOUT (connect_timeout); invalid_argument naming a malformed variable.
Result<TcpOptions> tcp_options_from_env();

/// Connects this rank to every other rank of the job (see the file comment) and returns the
/// transport; fails with the first set-up error (auth_failed when a peer refuses this rank,
/// timeout_error naming the ranks still missing, invalid_argument for a bad interface).
Result<std::unique_ptr<Transport>> connect_mesh(Store& store, int rank, int size,
                                                const std::string& secret,
                                                const std::string& job_id,
                                                const TcpOptions& options);

}  // namespace hoop::tcp
