// The shared-memory transport: one rank's channels to the other ranks of its host through
// POSIX shared memory, with no kernel copy on the data path.
//
// Layout (shm_segment.h): every rank creates one segment, /dev/shm/hoop-<job_id>-<mesh>-<rank>
// (mesh: a hash of key_prefix), mode 0600, with its pages reserved up front. It holds a header
// (owner pid, doorbell, sleeping flag, goodbye flag, abort slot) and one single-producer
// single-consumer byte ring per local peer that sends to it (ring_bytes each, the owner's
// choice), whose head (written by the sender) and tail (written by the owner) sit on cache lines
// of their own. A message is an 8-byte length, then the payload padded to 8 bytes; the sender
// streams it into the receiver's ring in pieces of up to 256 KiB and publishes the head after
// each, so the receiver copies one piece out while the next goes in and a message of any size
// passes through a ring of any size. A message waits in the ring until its receive is posted:
// the ring is the only buffer, and a sender whose ring is full waits. A message costs two memcpy
// and no system call. A send_lent() (one side of an exchange, whose receiver posts its receive
// without waiting on the send) of read_bytes or more (HOOP_SHM_READ_BYTES, 8 KiB or 1-2 MiB), to a
// receiver that can read the sender's memory, goes by single copy instead: the ring carries
// its length with the top bit set and the payload's address, and the receiver reads the
// payload with process_vm_readv straight into its receive buffer, then consumes the
// descriptor. The send completes once the receiver's tail has passed it, so the sender's
// buffer stays untouched while it is read; as in the rings, a receive of another length fails
// and the stream goes on.
//
// Shared slots (hoop::SharedSlots, shm_slots.cc), where every rank of the job is on this host:
// each segment also holds two slots of its owner, which the peers read in place; publish stores
// the call number after the data (release order) and rings the doorbell of peers that sleep;
// gather polls the peers' slots as wait() polls the rings, with the same abort, goodbye,
// pidfd and deadline rules ("shm: rank R: rank(s) ... did not reach collective call N (shared
// slots) before the deadline"). During set-up each rank also tries process_vm_readv on every
// peer and writes its verdict into its own header; combining every rank's verdict, all ranks
// agree whether read_peer() (one copy, Linux cross-memory attach) is available.
//
// Set-up: a rank publishes "<key_prefix>/ready/<rank>" once its segment exists, maps every
// peer's, then publishes "<key_prefix>/mapped/<rank>"; once every peer has mapped it, the owner
// unlinks its name, so a job that crashes after set-up leaves nothing in /dev/shm.
// remove_job_segments() sweeps what a crash during set-up may leave (hooprun calls it when a
// job ends).
//
// Waiting: wait() polls the rings (yielding the core between polls) for `spin` after bytes last
// moved, then sleeps on a futex in its own segment (the doorbell) that every peer rings after
// it puts bytes into one of this rank's rings or frees space in a ring this rank writes to, but
// only while the sleeping flag is up (a sleeper raises it, then looks at the rings once more, so
// no wake-up is lost). Sleeps last at most 10 ms so that a dead peer is noticed: peers are
// watched through pidfds, and a peer process that exits without shutting down in order (the
// destructor raises its goodbye flag) fails every request involving it with peer_lost naming
// its rank and pid.
//
// Failure rules follow the TCP transport (tcp_transport.h): abort(cause) fails every pending
// and later request and writes the cause (code and up to 1 KiB of text; the first one wins) into
// every peer's segment, whose own requests then fail with "shm: rank <r> aborted: <cause>"
// (and who pass it on in turn, since a rank may exit before its origin's word reaches a peer
// still waiting on it); a peer that shut down in order
// fails only what it can no longer deliver; a receive whose length differs from the matching
// send fails with protocol_error naming the peer and both lengths (the message is discarded and
// the stream goes on); a wait past its deadline fails with timeout_error naming the outstanding
// peers and aborts the transport.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "hoop/rendezvous.h"
#include "hoop/transport.h"

namespace hoop::shm {

/// Payload bytes of a shared slot where HOOP_SHM_SLOT_BYTES is unset.
inline constexpr std::size_t kSlotBytes = std::size_t{256} << 10;
/// The same where the ranks outnumber the cores and cross-memory reads are slow: the payloads
/// that every rank reads whole from 512 KiB to 4 MiB then take 0.3-0.8x their time by reading
/// (4 and 8 ranks on 2 cores, docs/BENCHMARKS.md "Wide slots where reads are slow").
inline constexpr std::size_t kWideSlotBytes = std::size_t{4} << 20;

/// How the shared-memory transport sizes its rings and waits.
struct ShmOptions {
  /// Bytes of each ring (one per ordered pair of ranks on the host); HOOP_SHM_RING_BYTES.
  std::size_t ring_bytes = std::size_t{4} << 20;
  /// Payload bytes of each of this rank's two shared slots (hoop::SharedSlots; each slot has 64
  /// bytes more for a header), offered when every rank of the job is a peer here; 0: none.
  /// Unset: kSlotBytes, in slots of kWideSlotBytes where `wide_slots` holds (the collectives
  /// fill them whole only in a crowded job whose reads are slow, one_host.h).
  /// HOOP_SHM_SLOT_BYTES.
  std::optional<std::size_t> slot_bytes;
  /// Whether slots of unset size are kWideSlotBytes; unset: where this host runs more of the
  /// job's ranks than this process has cores and cross-memory reads are slow here
  /// (cross_memory_reads_slow). Ranks may differ: every rank fills no more than the narrowest.
  std::optional<bool> wide_slots;
  /// Calls a rank that only gives may run ahead of the slowest rank through its small slots
  /// (hoop::SharedSlots::small_slots, twice this many; none with slot_bytes 0); 0: none.
  /// HOOP_SHM_RUN_AHEAD.
  std::size_t run_ahead = 128;
  /// An exchange's send of at least this many bytes goes by single copy where the receiver can
  /// read the sender's memory (cross-memory attach): the ring carries only its address and the
  /// receiver reads the payload where it lies; 0: every message through the rings; unset:
  /// default_read_bytes() (8 KiB, or 1-2 MiB where this system's cross-memory reads are slow).
  /// HOOP_SHM_READ_BYTES.
  std::optional<std::size_t> read_bytes;
  /// How long wait() keeps polling after bytes last moved before it sleeps; HOOP_SPIN_US.
  std::chrono::microseconds spin{200};
  /// Deadline for the whole set-up, store look-ups included; HOOP_START_TIMEOUT.
  std::chrono::milliseconds connect_timeout{30000};
  /// Store key prefix (and segment name part) of this mesh; several meshes of one job (process
  /// sets, control channels) need distinct prefixes.
  std::string key_prefix = "hoop/shm";
};

/// Options from HOOP_SHM_RING_BYTES, HOOP_SHM_SLOT_BYTES, HOOP_SHM_RUN_AHEAD, HOOP_SHM_READ_BYTES,
/// HOOP_SPIN_US and HOOP_START_TIMEOUT; invalid_argument naming a malformed variable (or a ring
/// under 64 KiB).
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
