// Set-up of the CUDA IPC transport: control segments and device rings created, published
// through the store (the rings as IPC handles), opened by every peer, then the segment names
// unlinked; and the communicator's entry point with options from the environment.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>
#include <vector>

#include "core/config.h"
#include "transports/cuda/cuda_conn.h"
#include "transports/shm/shm_peers.h"

namespace hoop::cuda {
namespace {

/// What a rank publishes about its device rings: their geometry, the IPC handle of their
/// allocation, and the senders they serve, in ring order.
struct RingsInfo {
  std::uint64_t slice_bytes = 0;
  std::uint32_t slots = 0;
  int device = -1;
  device::IpcHandle handle;
  std::vector<int> senders;
};

std::string encode(const RingsInfo& r) {
  std::string hex;
  for (unsigned char b : r.handle.bytes) hex += fmt::format("{:02x}", b);
  std::string out = fmt::format("{} {} {} {}", r.slice_bytes, r.slots, r.device, hex);
  for (int s : r.senders) out += fmt::format(" {}", s);
  return out;
}

Result<RingsInfo> decode(const std::string& text, int owner) {
  RingsInfo r;
  std::istringstream in(text);
  std::string hex;
  in >> r.slice_bytes >> r.slots >> r.device >> hex;
  for (int s; in >> s;) r.senders.push_back(s);
  const bool hex_ok = hex.size() == 2 * r.handle.bytes.size() &&
                      hex.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex_ok || r.slots < 2 || r.slots > kMaxSlots || r.slice_bytes == 0) {
    return protocol_error(
        fmt::format("cuda: rank {} published malformed ring information '{}'", owner, text));
  }
  for (std::size_t i = 0; i < r.handle.bytes.size(); ++i)
    r.handle.bytes[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return r;
}

Status check_arguments(int rank, int size, std::span<const int> peers, const std::string& job_id,
                       int device, const CudaOptions& o) {
  if (size < 1 || rank < 0 || rank >= size) {
    return invalid_argument(fmt::format("cuda: rank {} of {} is not a valid rank", rank, size));
  }
  std::set<int> seen;
  for (int p : peers) {
    if (p < 0 || p >= size || p == rank || !seen.insert(p).second) {
      return invalid_argument(fmt::format(
          "cuda: peer {} of rank {} is out of range, the rank itself or listed twice", p, rank));
    }
  }
  if (o.slice_bytes < 4096 || o.slice_bytes % 4096 != 0 || o.slots < 2 || o.slots > kMaxSlots) {
    return invalid_argument(fmt::format(
        "cuda: rings of {} slots of {} bytes: slots must be 2 to {} and slices a multiple of "
        "4096 bytes (HOOP_CUDA_SLOTS, HOOP_CUDA_SLICE_BYTES)",
        o.slots, o.slice_bytes, kMaxSlots));
  }
  if (job_id.empty() || job_id.size() > 200 || job_id.find('/') != std::string::npos ||
      o.key_prefix.empty()) {
    return invalid_argument(
        "cuda: the job id must be 1 to 200 bytes without '/' and the key prefix must not be "
        "empty");
  }
  if (device::device_count() == 0) {
    return invalid_argument(
        fmt::format("cuda: no usable CUDA device: {}", device::unavailable_reason()));
  }
  if (device < 0 || device >= device::device_count()) {
    return invalid_argument(
        fmt::format("cuda: CUDA device {} does not exist (this process sees {})", device,
                    device::device_count()));
  }
  return Status::success();
}

/// Opens `peer`'s published rings and sets up this rank's lanes to and from it.
Status open_peer(Peer& peer, int rank, int device, const shm::Segment& own, char* own_rings,
                 std::size_t own_ring_index, const CudaOptions& o, const std::string& published) {
  HOOP_ASSIGN_OR_RETURN(RingsInfo info, decode(published, peer.rank));
  const auto at = std::find(info.senders.begin(), info.senders.end(), rank);
  shm::RingControl* out = peer.segment.ring_of(rank);
  if (at == info.senders.end() || out == nullptr) {
    return invalid_argument(
        fmt::format("cuda: rank {} has no ring for rank {} (their lists of local peers differ)",
                    peer.rank, rank));
  }
  Result<device::IpcMapping> mapping = device::IpcMapping::open(info.handle);
  if (!mapping.ok())
    return mapping.status().with_context(fmt::format(
        "cuda: opening rank {}'s device rings (cuda:{} of pid {}; CUDA IPC needs every rank on "
        "one host, with peer access between devices)",
        peer.rank, info.device, peer.pid));
  peer.mapping = std::move(*mapping);
  const auto index = static_cast<std::uint64_t>(at - info.senders.begin());
  OutLane& lo = peer.out;
  lo.ctl = out;
  lo.records = reinterpret_cast<SliceRecord*>(peer.segment.data(*out));
  lo.slots = reinterpret_cast<char*>(peer.mapping.base()) +
             slot_offset(index, 0, info.slots, info.slice_bytes);
  lo.num_slots = info.slots;
  lo.slice_bytes = info.slice_bytes;
  InLane& li = peer.in;
  li.ctl = own.ring_of(peer.rank);
  li.records = reinterpret_cast<SliceRecord*>(own.data(*li.ctl));
  li.slots = own_rings + slot_offset(own_ring_index, 0, o.slots, o.slice_bytes);
  li.num_slots = o.slots;
  li.slice_bytes = o.slice_bytes;
  for (Lane* lane : {static_cast<Lane*>(&lo), static_cast<Lane*>(&li)}) {
    HOOP_ASSIGN_OR_RETURN(lane->stream, device::Stream::create(device));
    for (std::uint32_t s = 0; s < lane->num_slots; ++s) {
      HOOP_ASSIGN_OR_RETURN(device::Event e, device::Event::create(device));
      lane->events.push_back(std::move(e));
    }
  }
  return Status::success();
}

}  // namespace

Result<std::unique_ptr<Transport>> connect(Store& store, int rank, int size,
                                           std::span<const int> peer_list,
                                           const std::string& job_id, int device,
                                           const CudaOptions& options) {
  HOOP_RETURN_IF_ERROR(check_arguments(rank, size, peer_list, job_id, device, options));
  const Deadline deadline = Clock::now() + options.connect_timeout;
  const CudaOptions& o = options;
  HOOP_RETURN_IF_ERROR(device::set_device(device));
  std::vector<int> peers(peer_list.begin(), peer_list.end());
  std::sort(peers.begin(), peers.end());

  // The control segment: a header, and per sender a ring whose data area holds the records.
  const std::string own_name = shm::segment_name(job_id, o.key_prefix, rank);
  HOOP_ASSIGN_OR_RETURN(shm::Segment own, shm::Segment::create(own_name, rank, peers.data(),
                                                               peers.size(), shm::kMinRingBytes));
  struct Unlink {
    const std::string& name;
    ~Unlink() { ::shm_unlink(name.c_str()); }
  } unlink_own{own_name};
  HOOP_ASSIGN_OR_RETURN(device::Buffer rings,
                        device::Buffer::allocate(device, peers.size() * o.slots * o.slice_bytes));
  RingsInfo mine{o.slice_bytes, o.slots, device, {}, peers};
  if (!peers.empty()) {
    HOOP_ASSIGN_OR_RETURN(mine.handle, device::export_memory(rings.data()));
  }
  HOOP_RETURN_IF_ERROR(store.set(shm::peer_key(o.key_prefix, "rings", rank), encode(mine)));
  HOOP_RETURN_IF_ERROR(shm::wait_for_peers(store, "cuda", o.key_prefix, "rings",
                                           "create their rings", peers, rank, deadline,
                                           o.connect_timeout));
  std::vector<std::unique_ptr<Peer>> opened;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    auto peer = std::make_unique<Peer>();
    peer->rank = peers[i];
    HOOP_ASSIGN_OR_RETURN(
        peer->segment,
        shm::Segment::open(shm::segment_name(job_id, o.key_prefix, peer->rank), peer->rank));
    peer->pid = peer->segment.header()->pid;
    peer->pidfd = shm::open_pidfd(peer->pid);
    HOOP_ASSIGN_OR_RETURN(std::string published,
                          store.get(shm::peer_key(o.key_prefix, "rings", peer->rank)));
    HOOP_RETURN_IF_ERROR(open_peer(*peer, rank, device, own, reinterpret_cast<char*>(rings.data()),
                                   i, o, published));
    opened.push_back(std::move(peer));
  }
  HOOP_RETURN_IF_ERROR(store.set(shm::peer_key(o.key_prefix, "mapped", rank), "1"));
  HOOP_RETURN_IF_ERROR(shm::wait_for_peers(store, "cuda", o.key_prefix, "mapped",
                                           "open this rank's rings", peers, rank, deadline,
                                           o.connect_timeout));
  return std::unique_ptr<Transport>(std::make_unique<CudaTransport>(
      rank, size, device, o, std::move(own), std::move(rings), std::move(opened)));
}

Result<std::unique_ptr<Transport>> connect_for_communicator(const BootstrapInfo& info, Store& store,
                                                            const std::string& prefix, int device) {
  CudaOptions o;
  HOOP_ASSIGN_OR_RETURN(const std::int64_t spin, config::get_int("HOOP_SPIN_US"));
  HOOP_ASSIGN_OR_RETURN(const std::int64_t slice, config::get_int("HOOP_CUDA_SLICE_BYTES"));
  HOOP_ASSIGN_OR_RETURN(const std::int64_t slots, config::get_int("HOOP_CUDA_SLOTS"));
  o.spin = std::chrono::microseconds(spin);
  o.slice_bytes = static_cast<std::size_t>(slice);
  o.slots = static_cast<std::uint32_t>(slots);
  o.connect_timeout = info.start_timeout;
  o.key_prefix = prefix;
  std::vector<int> peers;
  for (int r = 0; r < info.size; ++r)
    if (r != info.rank) peers.push_back(r);
  return connect(store, info.rank, info.size, peers, info.job_id.empty() ? "job" : info.job_id,
                 device, o);
}

}  // namespace hoop::cuda
