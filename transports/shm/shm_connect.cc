// Set-up of the shared-memory transport: segments created, published and mapped through the
// store, then unlinked; and the options read from the environment.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "core/config.h"
#include "core/cores.h"
#include "core/log.h"
#include "transports/shm/shm_conn.h"
#include "transports/shm/shm_peers.h"

namespace hoop::shm {
namespace {

// NAME_MAX of /dev/shm, less room for the mesh hash and the rank.
constexpr std::size_t kMaxJobIdBytes = 200;

std::string key(const ShmOptions& o, std::string_view what, int rank) {
  return peer_key(o.key_prefix, what, rank);
}

Status wait_for_peers(Store& store, const ShmOptions& o, std::string_view what,
                      std::string_view doing, std::span<const int> peers, int rank,
                      Deadline deadline) {
  return shm::wait_for_peers(store, "shm", o.key_prefix, what, doing, peers, rank, deadline,
                             o.connect_timeout);
}

Status check_arguments(int rank, int size, std::span<const int> peers, const std::string& job_id,
                       const ShmOptions& o) {
  if (size < 1 || rank < 0 || rank >= size) {
    return invalid_argument(fmt::format("shm: rank {} of {} is not a valid rank", rank, size));
  }
  std::set<int> seen;
  for (int p : peers) {
    if (p < 0 || p >= size || p == rank || !seen.insert(p).second) {
      return invalid_argument(fmt::format(
          "shm: peer {} of rank {} is out of range, the rank itself or listed twice", p, rank));
    }
  }
  if (o.ring_bytes < kMinRingBytes) {
    return invalid_argument(fmt::format("shm: rings of {} bytes are below the minimum of {}",
                                        o.ring_bytes, kMinRingBytes));
  }
  if (job_id.empty() || job_id.size() > kMaxJobIdBytes || job_id.find('/') != std::string::npos ||
      o.key_prefix.empty()) {
    return invalid_argument(
        "shm: the job id must be 1 to 200 bytes without '/' and the key "
        "prefix must not be empty");
  }
  return Status::success();
}

}  // namespace

Result<ShmOptions> shm_options_from_env() {
  ShmOptions o;
  // The registry's range for the variable starts at kMinRingBytes.
  HOOP_ASSIGN_OR_RETURN(const std::int64_t ring, config::get_int("HOOP_SHM_RING_BYTES"));
  o.ring_bytes = static_cast<std::size_t>(ring);
  if (config::is_set("HOOP_SHM_SLOT_BYTES")) {
    HOOP_ASSIGN_OR_RETURN(const std::int64_t slot, config::get_int("HOOP_SHM_SLOT_BYTES"));
    o.slot_bytes = static_cast<std::size_t>(slot);
  }
  HOOP_ASSIGN_OR_RETURN(const std::int64_t ahead, config::get_int("HOOP_SHM_RUN_AHEAD"));
  o.run_ahead = static_cast<std::size_t>(ahead);
  if (config::is_set("HOOP_SHM_READ_BYTES")) {
    HOOP_ASSIGN_OR_RETURN(const std::int64_t read, config::get_int("HOOP_SHM_READ_BYTES"));
    o.read_bytes = static_cast<std::size_t>(read);
  }
  HOOP_ASSIGN_OR_RETURN(const std::int64_t spin, config::get_int("HOOP_SPIN_US"));
  o.spin = std::chrono::microseconds(spin);
  HOOP_ASSIGN_OR_RETURN(o.connect_timeout, config::get_milliseconds("HOOP_START_TIMEOUT"));
  return o;
}

Result<std::unique_ptr<Transport>> connect(Store& store, int rank, int size,
                                           std::span<const int> peers, const std::string& job_id,
                                           const ShmOptions& options) {
  HOOP_RETURN_IF_ERROR(check_arguments(rank, size, peers, job_id, options));
  const Deadline deadline = Clock::now() + options.connect_timeout;
  ShmOptions o = options;
  o.ring_bytes = o.ring_bytes / 4096 * 4096;  // whole pages, so every ring starts on one
  const std::string own_name = segment_name(job_id, o.key_prefix, rank);
  // Slots only where every rank of the job is here: a collective uses them on all ranks or none.
  // The caller's header (a call fingerprint) comes on top of the payload the option names.
  const auto with_reserve = [](std::size_t payload) {
    return payload > 0 ? (payload + kSlotReserve + 15) / 16 * 16 : 0;
  };
  const bool all_here = peers.size() + 1 == static_cast<std::size_t>(size);
  const std::size_t narrow = with_reserve(all_here ? o.slot_bytes.value_or(kSlotBytes) : 0);
  const bool wide = narrow > 0 && !o.slot_bytes &&
                    o.wide_slots.value_or(static_cast<int>(peers.size()) + 1 > usable_cores() &&
                                          cross_memory_reads_slow());
  HOOP_ASSIGN_OR_RETURN(Segment own,
                        Segment::create(own_name, rank, peers.data(), peers.size(), o.ring_bytes,
                                        {.bytes = wide ? with_reserve(kWideSlotBytes) : narrow,
                                         .default_bytes = narrow},
                                        2 * o.run_ahead));
  // Until the peers have mapped it the name must stay; after that (or on failure) it goes.
  struct Unlink {
    const std::string& name;
    ~Unlink() { ::shm_unlink(name.c_str()); }
  } unlink_own{own_name};

  HOOP_RETURN_IF_ERROR(store.set(key(o, "ready", rank), std::to_string(::getpid())));
  HOOP_RETURN_IF_ERROR(
      wait_for_peers(store, o, "ready", "create their segments", peers, rank, deadline));
  std::vector<std::unique_ptr<Peer>> mapped;
  for (int p : peers) {
    auto peer = std::make_unique<Peer>();
    peer->rank = p;
    HOOP_ASSIGN_OR_RETURN(peer->segment, Segment::open(segment_name(job_id, o.key_prefix, p), p));
    const Segment& seg = peer->segment;
    RingControl* out = seg.ring_of(rank);
    RingControl* in = own.ring_of(p);
    if (out == nullptr) {
      return invalid_argument(fmt::format(
          "shm: rank {}'s segment has no ring for rank {} (their lists of local peers differ)", p,
          rank));
    }
    peer->out.ctl = out;
    peer->out.data = seg.data(*out);
    peer->out.capacity = out->capacity;
    peer->in.ctl = in;
    peer->in.data = own.data(*in);
    peer->in.capacity = in->capacity;
    if (seg.header()->default_slot_bytes != narrow) {
      return invalid_argument(fmt::format(
          "shm: rank {} has shared slots of {} bytes and rank {} of {} (HOOP_SHM_SLOT_BYTES must "
          "be the same on every rank)",
          p, seg.header()->default_slot_bytes, rank, narrow));
    }
    if (seg.header()->small_slots != own.header()->small_slots) {
      return invalid_argument(fmt::format(
          "shm: rank {} has {} small shared slots and rank {} has {} (HOOP_SHM_RUN_AHEAD must "
          "be the same on every rank)",
          p, seg.header()->small_slots, rank, own.header()->small_slots));
    }
    peer->pid = seg.header()->pid;
    peer->pidfd = open_pidfd(peer->pid);
    mapped.push_back(std::move(peer));
  }
  // Cross-memory attach between every pair, for single-copy collectives: each rank gives its own
  // verdict, and every rank combines all of them once all have mapped (the same answer on all).
  bool reads = true;
  for (const auto& peer : mapped) {
    std::string why;
    if (!can_read_memory_of(peer->pid, peer->segment.header()->owner_base, kSegmentMagic, why)) {
      HOOP_LOG(kDebug, "shm: cross-memory attach to rank {} refused ({}); mid-size collectives "
                       "go through the rings", peer->rank, why);
      reads = false;
      break;
    }
  }
  // The reads' speed goes with the verdict, so that every rank leaves the same calls to the
  // slots (one_host.h's budget), whatever each one measured.
  own.header()->reads_peers.store(
      !reads ? kCannotReadPeers : (cross_memory_reads_slow() ? kReadsPeersSlowly : kReadsPeers),
      std::memory_order_release);
  HOOP_RETURN_IF_ERROR(store.set(key(o, "mapped", rank), "1"));
  HOOP_RETURN_IF_ERROR(
      wait_for_peers(store, o, "mapped", "map this rank's segment", peers, rank, deadline));
  return std::unique_ptr<Transport>(
      std::make_unique<ShmTransport>(rank, size, o, std::move(own), std::move(mapped)));
}

}  // namespace hoop::shm
