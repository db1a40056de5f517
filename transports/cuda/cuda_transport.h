// The CUDA IPC transport: one rank's channels to the other ranks of its host for buffers in
// CUDA device memory (the same device or peer devices), with no host copy on the data path.
//
// Layout, per ordered pair sender -> receiver:
//   - a device ring of `slots` slots of `slice_bytes` each, allocated by the receiver (one
//     cudaMalloc for all its senders), exported with cudaIpcGetMemHandle and opened by the
//     sender with cudaIpcOpenMemHandle(cudaIpcMemLazyEnablePeerAccess);
//   - in the receiver's host control segment (transports/shm's Segment: POSIX shared memory,
//     mode 0600, unlinked once every peer has mapped it), the ring's head (records the sender
//     published) and tail (records the receiver released), and one 16-byte record per slot
//     saying which message the slot's bytes belong to (its length) and where they go in it.
// A message of n bytes travels as max(1, ceil(n / slice_bytes)) slices, one per slot. The
// sender copies a slice into a free slot with cudaMemcpyAsync on its own stream, records an
// event, and publishes the slot's record and the head only once that event has completed, so
// the receiver never sees bytes still in flight; the receiver copies the slice out on its
// stream and releases the slot (the tail) once that copy has completed. Up to `slots` slices
// of one pair are in flight at once, so a large message streams through a small ring.
//
// Synchronization and failure follow the shared-memory transport (shm_transport.h), whose
// segment header this transport uses as is: peers ring the owner's doorbell (a futex) when they
// publish or release, a rank with no copy in flight sleeps on it, a rank with copies in flight
// polls their events; peers are watched through pidfds, a peer process that exits without its
// goodbye fails every request involving it with peer_lost naming its rank and pid; abort(cause)
// writes the cause into every peer's segment; a receive whose length differs from the matching
// send fails with protocol_error naming the peer and both lengths; a wait past its deadline
// fails with timeout_error naming the outstanding peers and aborts the transport.
//
// send/recv take device memory only (any device this process can reach, managed memory too);
// host memory is invalid_argument naming the buffer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "hoop/rendezvous.h"
#include "hoop/transport.h"

namespace hoop::cuda {

/// How the CUDA IPC transport sizes its rings and waits.
struct CudaOptions {
  /// Bytes of one slot of a device ring (a multiple of 4 KiB).
  std::size_t slice_bytes = std::size_t{1} << 20;
  /// Slots of each device ring (one ring per ordered pair), 2 to 4096.
  std::uint32_t slots = 8;
  /// How long wait() keeps polling after bytes last moved before it sleeps; HOOP_SPIN_US.
  std::chrono::microseconds spin{200};
  /// Deadline for the whole set-up, store look-ups included; HOOP_START_TIMEOUT.
  std::chrono::milliseconds connect_timeout{30000};
  /// Store key prefix (and control segment name part) of this mesh.
  std::string key_prefix = "hoop/cuda";
};

/// Connects rank `rank` of a `size`-rank job to the ranks in `peers` (global rank numbers, all
/// on this host, `rank` itself excluded) through CUDA IPC, with this rank's rings on `device`.
/// Every rank in `peers` must make the same call with its own list. invalid_argument for bad
/// arguments or options, or where no CUDA device is usable.
Result<std::unique_ptr<Transport>> connect(Store& store, int rank, int size,
                                           std::span<const int> peers, const std::string& job_id,
                                           int device, const CudaOptions& options);

/// Connects every rank of the one-host job `info` to every other through CUDA IPC, under store
/// keys `prefix`, with options from HOOP_SPIN_US, HOOP_CUDA_SLICE_BYTES, HOOP_CUDA_SLOTS and
/// `info.start_timeout`: a communicator's
/// device transport (HOOP_GPU_BACKEND=hoop). Called collectively by every rank.
Result<std::unique_ptr<Transport>> connect_for_communicator(const BootstrapInfo& info, Store& store,
                                                            const std::string& prefix, int device);

}  // namespace hoop::cuda
