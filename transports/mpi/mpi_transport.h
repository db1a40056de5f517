// The MPI transport: one rank's channels to every other rank of an mpirun-launched job over
// the MPI library, for clusters where MPI is the sanctioned fabric (HOOP_TRANSPORT=mpi).
//
// Communicators: connect() duplicates MPI_COMM_WORLD twice (MPI_Comm_idup, driven with a
// deadline), one for data and one for control, so hoop's messages never match the
// application's, and sets MPI_ERRORS_RETURN on both, so an MPI error becomes a Status
// instead of killing the job. hoop's rank numbering must be MPI_COMM_WORLD's: connect()
// refuses a rank or size that differs, which also rules out process sets smaller than the
// world (a subset cannot take part in a duplication of the world).
//
// Data: a message travels on the data communicator in chunks of at most chunk_bytes (MPI
// counts are ints): every chunk but the last carries tag kMore, the last (the only one of a
// message up to chunk_bytes, or of an empty message) tag kLast. A receive matches its chunks
// with MPI_Improbe on (peer, MPI_ANY_TAG) and MPI_Imrecv, one pending receive per peer at a
// time, so MPI's non-overtaking rule keeps messages in order per pair and the receiver learns
// the sender's length before it accepts bytes: a receive whose length differs from the send
// fails with protocol_error naming the peer and both lengths; the surplus is read into a
// scratch buffer and dropped, and the stream goes on.
//
// Progress: MPI has no file descriptor to sleep on, so wait() and poll() test every pending
// request in a loop, yielding the core between sweeps for `spin` after something last moved
// and sleeping 50 us to 1 ms after that; wake() sets an atomic flag that poll() checks. Every
// wait has a deadline: a wait past it fails with timeout_error naming the outstanding peers
// and aborts the transport, as the TCP transport does.
//
// Control and failure: every rank keeps one receive posted on the control communicator for
// (MPI_ANY_SOURCE, kControl). abort(cause) fails every pending and later request and sends
// every peer the cause (code and up to 1 KiB of text); a peer that receives it fails its own
// requests with "mpi: rank <r> aborted: <cause>". The destructor sends a goodbye carrying how
// many chunks this rank sent to that peer, so a peer's receive fails with peer_lost ("rank r
// shut its mpi transport down") only once every chunk sent before the goodbye was matched.
// MPI cannot cancel a transfer it has matched, so a request that fails while MPI still moves
// its bytes (an abort in the middle of a large message) leaves that transfer running: its
// buffer may be read or written until the transfer ends, which progress and the destructor
// (for up to 0.5 s) wait for. After such a failure the data communicator is not freed, so that
// a later duplicate cannot reuse its context id and meet the stale chunks.
// Control messages carry the transport's serial number (the same on every rank, since the
// duplications are collective), so a late message for an earlier transport is ignored.
//
// A rank that dies: Open MPI's mpirun notices a process that exits without MPI_Finalize and
// kills the whole job ("mpirun has exited due to process rank N ... without calling
// finalize"), so survivors are usually killed rather than told; when MPI does report an
// error first, the request fails with peer_lost naming the rank and MPI's error text.
//
// Threads: hoop needs MPI_THREAD_SERIALIZED at least, since the runtime drives a transport
// from its background thread rather than the thread that initialized MPI; it serializes its
// own MPI calls through one process-wide mutex. When hoop initializes MPI it asks for
// MPI_THREAD_MULTIPLE, so that the application may also call MPI from its own threads, and
// finalizes MPI at exit.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "hoop/transport.h"

namespace hoop::mpi {

/// How the MPI transport chunks messages and waits.
struct MpiOptions {
  /// Largest chunk of one MPI message (at most INT_MAX); larger messages are split.
  std::size_t chunk_bytes = std::size_t{1} << 30;
  /// How long wait() keeps polling after something last moved before it sleeps; HOOP_SPIN_US.
  std::chrono::microseconds spin{200};
  /// Deadline for duplicating the communicators (every rank must take part);
  /// HOOP_START_TIMEOUT.
  std::chrono::milliseconds connect_timeout{30000};
};

/// Options from HOOP_SPIN_US and HOOP_START_TIMEOUT.
Result<MpiOptions> mpi_options_from_env();

/// The MPI library's own version line ("Open MPI v4.1.4, ..."), for `hooprun --check-build`;
/// MPI allows asking before MPI_Init.
std::string mpi_library_version();

/// Whether this process can use the MPI transport: MPI is (or can still be) initialized and
/// mpirun launched the process (OMPI_COMM_WORLD_SIZE set). When not, `why` (if given) says which
/// (a plain process, hooprun's ranks included, is refused: the transport needs mpirun's world).
bool mpi_usable(std::string* why);

/// Initializes MPI if nobody has (MPI_Init_thread asking for MPI_THREAD_MULTIPLE; finalized
/// at exit), then checks the thread level and that `rank` and `size` are MPI_COMM_WORLD's.
Status ensure_world(int rank, int size);

/// Connects rank `rank` of a `size`-rank mpirun job to every other rank over MPI. Every rank
/// must call it at the same point (the duplication of MPI_COMM_WORLD is collective).
Result<std::unique_ptr<Transport>> connect(int rank, int size, const MpiOptions& options);

/// Every rank's `mine` (at most 255 bytes), by rank, over a duplicate of MPI_COMM_WORLD: the
/// host identities a job without a rendezvous store needs for its layout. Collective.
Result<std::vector<std::string>> allgather_strings(const std::string& mine,
                                                   std::chrono::milliseconds timeout);

}  // namespace hoop::mpi
