// The UCX transport: one rank's channels to the other ranks of a job through UCX's UCP API, so
// that whatever fabric UCX drives (InfiniBand/RoCE verbs, TCP, shared memory) carries hoop's
// messages. UCX_TLS, UCX_NET_DEVICES and every other UCX_* variable apply as UCX documents them:
// the configuration is read with ucp_config_read and nothing in it is overridden.
//
// Set-up (connect): every rank makes one UCP context and one worker (tag matching and wake-up
// features, single-threaded), publishes "<key_prefix>/addr/<rank>" in the store (job id, host
// id, pid and the worker's address), waits for its peers' records and creates an endpoint to
// each with peer error handling, so that a peer that dies or becomes unreachable is reported on
// its endpoint rather than hanging the requests on it.
//
// Messages: UCP tagged messages whose 64-bit tag holds the sender's rank and a per-pair sequence
// number; the k-th receive a rank posts for peer p probes for exactly (p, k), so messages
// between a pair stay ordered whatever order UCX delivers them in, and the receive learns the
// sender's length before any byte lands (a different length is a protocol_error naming the peer
// and both lengths; the message is drained into scratch memory and the stream goes on). Large
// messages take UCX's rendezvous protocol, which registers the buffers itself. A receive is
// matched (ucp_tag_msg_recv) when its message is there, so every byte lands in the caller's
// buffer directly or in UCX's own bounce buffers; nothing is copied by hoop.
//
// Progress is the caller's: wait(), test() and poll() call ucp_worker_progress and then match,
// reap and look at the peers. wait() polls (yielding the core) for `spin` after something last
// moved, then sleeps on the worker's event fd (ucp_worker_arm) in slices of at most 10 ms, so
// that dead peers are noticed while it sleeps; wake() is ucp_worker_signal, which UCX allows
// from any thread.
//
// Failure rules follow the TCP and shared-memory transports:
//  - a peer whose endpoint fails (UCX reports a reset, a timeout or an unreachable peer), or
//    whose process exits on this host without the goodbye: this rank aborts with peer_lost
//    naming the rank (and pid), and every pending and later request fails with it;
//  - a peer that shut down in order sends a goodbye carrying how many messages it sent: the
//    receives those messages match still complete, later ones fail with peer_lost "rank <r>
//    shut its transport down";
//  - abort(cause) fails every pending and later request and sends the cause (code and up to
//    1 KiB of text) as a control message to every peer still reachable, whose requests then
//    fail with "ucx: rank <r> aborted: <cause>" (not passed on again);
//  - a wait() whose deadline passes returns timeout_error naming the requests and peers still
//    outstanding and aborts the transport with it, unless a peer's cause is already there;
//  - every rank that aborts sends its peers an "alive" control message; a rank whose abort is
//    a timeout (its own or a peer's) waits up to 1 s for every open peer's, and names those
//    that sent none (a stopped or hung process) in its error. The peers a timeout names may be
//    live ranks that wait in turn for the stopped one: this way every rank names it.
//
// Authentication: UCX has no handshake of its own. Worker addresses come only from the
// rendezvous store, which every rank joins with the job secret (HMAC), and each record carries
// the job id, which is checked; a process outside the job learns no address from hoop. What
// UCX itself listens on (e.g. its TCP sockets) is not authenticated beyond that, as with MPI or
// NCCL over UCX: run jobs on networks that only the job's hosts reach.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "hoop/rendezvous.h"
#include "hoop/transport.h"

namespace hoop::ucx {

/// How the UCX transport connects and waits.
struct UcxOptions {
  /// How long wait() keeps polling after something last moved before it sleeps; HOOP_SPIN_US.
  std::chrono::microseconds spin{200};
  /// Deadline for the whole set-up, store look-ups included; HOOP_START_TIMEOUT.
  std::chrono::milliseconds connect_timeout{30000};
  /// Store key prefix of this mesh; several meshes of one job (process sets) need distinct ones.
  std::string key_prefix = "hoop/ucx";
};

/// Options from HOOP_SPIN_US and HOOP_START_TIMEOUT; invalid_argument naming a malformed one.
Result<UcxOptions> ucx_options_from_env();

/// The UCX library's version ("1.13.1"), for `hooprun --check-build`.
std::string ucx_version();

/// Whether this process can use the UCX transport now: opens (and closes) a UCP context and
/// worker under the current UCX_* variables, as connect() would. When not, `why` (if given)
/// says what failed, e.g. a UCX_TLS naming no transport this host has.
bool ucx_usable(std::string* why);

/// Connects rank `rank` of a `size`-rank job to the ranks in `peers` (global rank numbers,
/// `rank` itself excluded) over UCX. The transport numbers ranks globally: send/recv to a rank
/// outside `peers` fails with invalid_argument. Every rank in `peers` must make the same call
/// with its own list (rank a lists b exactly when b lists a).
Result<std::unique_ptr<Transport>> connect(Store& store, int rank, int size,
                                           std::span<const int> peers, const std::string& job_id,
                                           const UcxOptions& options);

}  // namespace hoop::ucx
