// The CUDA IPC transport's internal state: requests, and per peer the lane this rank sends on
// (the peer's device ring, opened through IPC, and its control ring in the peer's segment) and
// the lane it receives on (its own device ring and control ring for that peer), each with its
// stream, its per-slot events and the requests queued on it (internal to transports/cuda).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/fd.h"
#include "device/device.h"
#include "hoop/transport.h"
#include "transports/cuda/cuda_framing.h"
#include "transports/cuda/cuda_transport.h"
#include "transports/shm/shm_segment.h"
#include "transports/skeleton.h"

namespace hoop::cuda {

using transports::kPeerCheckInterval;

/// invalid_argument naming `operand` ("send buffer", "receive buffer") unless `data` is memory
/// a CUDA copy reaches as device memory; a zero-byte buffer may be anything, null included.
Status check_device_buffer(const void* data, std::size_t bytes, std::string_view operand);

/// One posted send or receive.
struct Request : transports::RequestBase {};

/// What both ends of a lane have: the ring's geometry, its control, the local stream that
/// copies and one event per slot.
struct Lane {
  shm::RingControl* ctl = nullptr;  // head and tail, counted in records
  SliceRecord* records = nullptr;   // one per slot, in the receiver's segment
  char* slots = nullptr;            // the device ring, slot 0
  std::uint32_t num_slots = 0;
  std::uint64_t slice_bytes = 0;
  device::Stream stream;
  std::vector<device::Event> events;  // one per slot, recorded after its copy
  std::uint64_t issued = 0;           // records whose copy is queued
  std::uint64_t finished = 0;         // records whose copy completed (published or released)
};

/// This rank's end of the ring it writes in a peer's device memory.
struct OutLane : Lane {
  std::uint64_t tail_seen = 0;     // the receiver's tail when last read
  std::deque<Request*> sends;      // front() is being sliced
  std::uint64_t front_offset = 0;  // bytes of front() whose copy is queued
  // Per record issued, not yet published: the record, and the send it ends (or null).
  std::deque<std::pair<SliceRecord, Request*>> queued;
};

/// This rank's end of the ring a peer writes in this rank's device memory.
struct InLane : Lane {
  std::uint64_t head_seen = 0;     // the sender's head when last read
  std::deque<Request*> recvs;      // posted, not yet matched with a message
  bool in_message = false;         // a message's slices are being read
  std::uint64_t length = 0;        // its length
  std::uint64_t next_offset = 0;   // bytes of it whose copy is queued
  Request* target = nullptr;       // where it goes (null: a length mismatch, discarded)
  std::deque<Request*> completes;  // per record issued, not released: the receive it ends
};

/// One local peer.
struct Peer {
  int rank = -1;
  int pid = -1;
  Fd pidfd;              // readable once the peer process has exited; invalid: not watched
  shm::Segment segment;  // the peer's control segment, mapped here
  device::IpcMapping mapping;  // the peer's device rings, opened here
  OutLane out;
  InLane in;
  Status closed;  // not ok once the peer is gone (orderly or not)
};

/// The Transport over the rings of a finished set-up.
class CudaTransport final : public transports::Skeleton<Request> {
 public:
  CudaTransport(int rank, int size, int device, const CudaOptions& options, shm::Segment own,
                device::Buffer rings, std::vector<std::unique_ptr<Peer>> peers);
  ~CudaTransport() override;

  std::string_view name() const override { return "cuda"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool accepts_device_memory() const override { return true; }
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override;
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override;
  void wake() override;
  void abort(const Status& cause) override;

 private:
  // cuda_transport.cc
  Result<Peer*> check_peer(int peer, const void* data, std::size_t bytes, bool is_send);
  void complete(Request& req) { req.finish(); }
  void complete(Request& req, const Status& why) { req.finish(why); }
  /// Whether a copy of this rank is queued on the device and not yet seen complete: nobody
  /// rings the doorbell when one completes, so a wait polls its event meanwhile.
  bool must_poll() const override;
  /// Waits for every copy this rank queued, so none writes a caller's buffer once its request
  /// has failed; bounded, since a failing peer must not hang this rank.
  void settle_copies();

  // cuda_io.cc
  /// Moves what every lane allows now; true when a slice moved or a request completed.
  bool progress() override;
  bool publish_out(Peer& p);
  bool issue_out(Peer& p);
  bool release_in(Peer& p);
  bool issue_in(Peer& p);
  /// Sleeps on the own doorbell up to `timeout_us` unless progress() moves something first.
  bool sleep(Clock::duration max, bool stop_on_wake) override;
  void check_remote_abort();
  void check_peers() override;
  /// Delivers what `p` left in its ring, then fails what can no longer complete on it.
  void close_peer(Peer& p, const Status& why);
  /// Copies out what `p` has published for the posted receives and waits for those copies.
  void drain_in(Peer& p);

  int rank_;
  int size_;
  int device_;
  shm::Segment own_;
  shm::SegmentHeader* own_header_;
  device::Buffer rings_;  // this rank's device rings, one per sender; outlives the peers
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Peer*> by_rank_;  // size_ entries, null for ranks not in `peers`
  Status aborted_;
};

}  // namespace hoop::cuda
