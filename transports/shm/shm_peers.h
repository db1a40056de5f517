// What the shared-memory and CUDA IPC transports share about their local peers (internal to
// transports/): a peer's process watched through a pidfd, its liveness read together with the
// goodbye flag of its segment, the abort cause a peer wrote into this rank's segment, and the
// store look-ups of their set-up.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/fd.h"
#include "hoop/rendezvous.h"
#include "hoop/transport.h"
#include "transports/shm/shm_segment.h"

namespace hoop::shm {

/// A pidfd for `pid`, or an invalid Fd when the kernel cannot give one (the peer is then
/// watched with kill(pid, 0), which a reused pid can fool).
Fd open_pidfd(int pid);

/// How a peer process stands, seen from its segment header and its pidfd.
enum class PeerState : std::uint8_t { kAlive, kGoodbye, kDied };

/// kGoodbye once `header`'s owner shut its transport down in order (its exit is then no
/// crash), kDied once process `pid` (watched through `pidfd` when valid) exited without one.
PeerState peer_state(const SegmentHeader& header, const Fd& pidfd, int pid);

/// Whether this process can read process `pid`'s memory with process_vm_readv (cross-memory
/// attach; ptrace rules or a seccomp policy may refuse it): reads 8 bytes at `address` and
/// compares them with `expect`. Why not, in `why`.
bool can_read_memory_of(int pid, std::uint64_t address, std::uint64_t expect, std::string& why);

/// Copies `bytes` at `remote` in process `pid` to `local` (as many calls as the kernel needs);
/// the errno of a failure, 0 on success.
int read_memory_of(int pid, const void* remote, void* local, std::size_t bytes);
/// Copies `bytes` at `local` to `remote` in process `pid`; as read_memory_of.
int write_memory_of(int pid, const void* local, void* remote, std::size_t bytes);
/// The same for memory in pieces: `remote` in process `pid` to `local`, both in order and of
/// the same total.
int read_memory_of(int pid, std::span<const MemoryPiece> remote,
                   std::span<const MemoryPiece> local);

/// Where single copy starts to pay for an exchange's send (ShmOptions::read_bytes unset): the
/// receiver's one cross-memory read against the ring's two memcpy, which the sender and the
/// receiver make at once on two cores, with no system call and no wait for the receiver before
/// the send completes.
inline constexpr std::size_t kLendFromBytes = std::size_t{8} << 10;
/// The same where the kernel's cross-memory reads copy at under 1/kSlowReadRatio of memcpy's
/// speed (a virtual machine that pins each page at a cost): there the rings won up to 2 MiB
/// with a core per rank, and up to 512 KiB with 4 ranks on 2 cores, where the ring's second
/// copy takes a share of a core that another rank needs (docs/BENCHMARKS.md, "Where single
/// copy pays").
inline constexpr std::size_t kLendSlowFromBytes = std::size_t{2} << 20;
inline constexpr std::size_t kLendSlowCrowdedFromBytes = std::size_t{1} << 20;
inline constexpr int kSlowReadRatio = 2;
/// Whether this system's cross-memory reads are slow (see kLendSlowFromBytes): times a 256 KiB
/// process_vm_readv of this process's own memory against a memcpy, once per process (about
/// 0.1 ms); false where the read is refused.
bool cross_memory_reads_slow();
/// Where an exchange's send starts to go by single copy when ShmOptions::read_bytes is unset,
/// on a host whose ranks outnumber its cores (`crowded`) or not.
std::size_t default_read_bytes(bool crowded);

/// The abort cause a peer wrote into `header`, as "<transport>: rank <origin> aborted: <text>"
/// with its code; nullopt while there is none.
std::optional<Status> posted_abort(const SegmentHeader& header, std::string_view transport);

/// Sleeps on `header`'s doorbell (this rank's own) up to `timeout_us`, unless `ready()`, called
/// once the sleeping flag is up (so that a peer publishing after it rings), returns true; true
/// when ready() did or the doorbell rang.
bool doze(SegmentHeader& header, std::int64_t timeout_us, const std::function<bool()>& ready);

/// The store key "<prefix>/<what>/<rank>".
std::string peer_key(std::string_view prefix, std::string_view what, int rank);

/// Waits until every rank in `peers` has set peer_key(prefix, what, peer), by `deadline` (the
/// end of a set-up that may take `budget` in all); a timeout_error names `transport`, this
/// rank, the ranks that did not, `doing` and `budget`.
Status wait_for_peers(Store& store, std::string_view transport, std::string_view prefix,
                      std::string_view what, std::string_view doing, std::span<const int> peers,
                      int rank, Deadline deadline, std::chrono::milliseconds budget);

}  // namespace hoop::shm
