// The shared-memory transport: one rank's channels to the other ranks of its host through
// POSIX shared memory, with no kernel copy on the data path.
//
// Layout: every rank creates one segment, /dev/shm/hoop-<job_id>-<mesh>-<rank>, that holds a
// header (owner pid, doorbell, abort flag and cause) and one single-producer single-consumer
// byte ring per local peer that sends to it (ring_bytes each). A sender copies a message
// (a small length header, then the payload) into the receiver's ring as space allows; the
// receiver copies it out into the posted buffer. Rings are pages shared by both processes, so
// a message costs two memcpy and no system call.
//
// Clean-up: once every local peer has mapped a rank's segment (agreed through the store), the
// owner unlinks its name, so a job that crashes after set-up leaves nothing in /dev/shm.
// remove_job_segments() sweeps what a crash during set-up may leave (hooprun calls it when a
// job ends).
//
// Waiting: wait() polls the rings (yielding the core between polls) for `spin` after bytes last
// moved, then sleeps on a futex in its own segment (the doorbell) that every peer rings after
// it puts bytes into one of this rank's rings or frees space in a ring this rank writes to.
// Sleeps are bounded (a few milliseconds) so that a dead peer is noticed: peers are watched
// through pidfds, and a peer process that exits without shutting down in order fails every
// request involving it with peer_lost naming its rank and pid.
//
// Failure rules follow the TCP transport (tcp_transport.h): abort(cause) fails every pending
// and later request and writes the cause into every peer's segment, whose own requests then
// fail with it; a receive whose length differs from the matching send fails with
// protocol_error naming the peer and both lengths; a wait past its deadline fails with
// timeout_error naming the outstanding peers and aborts the transport.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "hoop/rendezvous.h"
#include "hoop/transport.h"

namespace hoop::shm {

/// How the shared-memory transport sizes its rings and waits.
struct ShmOptions {
  /// Bytes of each ring (one per ordered pair of ranks on the host); HOOP_SHM_RING_BYTES.
  std::size_t ring_bytes = std::size_t{4} << 20;
  /// How long wait() keeps polling after bytes last moved before it sleeps; HOOP_SPIN_US.
  std::chrono::microseconds spin{200};
  /// Deadline for the whole set-up, store look-ups included; HOOP_START_TIMEOUT.
  std::chrono::milliseconds connect_timeout{30000};
  /// Store key prefix (and segment name part) of this mesh; several meshes of one job (process
  /// sets, control channels) need distinct prefixes.
  std::string key_prefix = "hoop/shm";
};

/// Options from HOOP_SHM_RING_BYTES, HOOP_SPIN_US and HOOP_START_TIMEOUT; invalid_argument
/// naming a malformed variable (or a ring under 64 KiB).
Result<ShmOptions> shm_options_from_env();

/// Connects rank `rank` of a `size`-rank job to the ranks in `peers` (global rank numbers, all
/// on this host, `rank` itself excluded) over shared memory. The transport numbers ranks
/// globally: send/recv to a rank outside `peers` fails with invalid_argument. Every rank in
/// `peers` must make the same call with its own list (the same host's ranks).
Result<std::unique_ptr<Transport>> connect(Store& store, int rank, int size,
                                           std::span<const int> peers, const std::string& job_id,
                                           const ShmOptions& options);

/// The /dev/shm name prefix of every segment of job `job_id` ("hoop-<job_id>-").
std::string segment_prefix(const std::string& job_id);

/// Unlinks every segment of job `job_id` still named in /dev/shm; returns how many.
int remove_job_segments(const std::string& job_id);

}  // namespace hoop::shm
