// The UCX transport's internal state: the tag layout, the UCP handles, requests, and per peer
// its endpoint, sequence numbers and the receives waiting for their message (internal to
// transports/ucx).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fd.h"
#include "hoop/transport.h"
#include "transports/skeleton.h"
#include "transports/ucx/ucx_transport.h"

namespace hoop::ucx {

// Tag layout: bit 63 marks a control message; bits 40..62 hold the sender's rank; bits 0..39
// the per-pair sequence number of a data message, or the kind of a control message.
inline constexpr int kSeqBits = 40;
inline constexpr int kRankBits = 23;
inline constexpr ucp_tag_t kControlBit = ucp_tag_t{1} << 63;
inline constexpr ucp_tag_t kSeqMask = (ucp_tag_t{1} << kSeqBits) - 1;
inline constexpr ucp_tag_t kAllBits = ~ucp_tag_t{0};
inline constexpr int kMaxRanks = 1 << kRankBits;

inline ucp_tag_t data_tag(int source, std::uint64_t seq) {
  return (static_cast<ucp_tag_t>(source) << kSeqBits) | (seq & kSeqMask);
}
inline int tag_source(ucp_tag_t tag) { return static_cast<int>((tag & ~kControlBit) >> kSeqBits); }

/// Kinds of control message (the low bits of a control tag).
enum class Control : std::uint8_t {
  kAbort = 1,    // payload: one byte of StatusCode, then the cause's text
  kGoodbye = 2,  // payload: the number of data messages the sender sent, 8 bytes little-endian
  kAlive = 3,    // no payload: the sender has aborted too, so it is alive and answering
};

/// Longest abort text sent to peers.
inline constexpr std::size_t kMaxAbortText = 1024;

using transports::kPeerCheckInterval;
/// How long a peer whose process exited may take to deliver its goodbye (still in flight in
/// the fabric when the exit is seen) before the exit counts as a crash.
inline constexpr std::chrono::milliseconds kExitGrace{300};
/// How long a rank that aborts on a timeout waits for every peer's kAlive before it names the
/// peers that sent none (a stopped or hung process).
inline constexpr std::chrono::milliseconds kAnswerGrace{1000};
/// How long abort and shutdown drive control messages and endpoint closes before giving up.
inline constexpr std::chrono::milliseconds kFlushTimeout{2000};

/// Text of a UCS status.
std::string ucs_text(ucs_status_t status);

/// The UCP context and worker of one rank, released in the right order.
struct Ucp {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int event_fd = -1;  // the worker's event fd; -1 when UCX gives none (then sleeps are short)

  Ucp() = default;
  Ucp(const Ucp&) = delete;
  Ucp& operator=(const Ucp&) = delete;
  ~Ucp();
};

/// One posted send or receive.
struct Request : transports::RequestBase {
  std::uint64_t seq = 0;
  void* ucp = nullptr;        // the UCP request while UCX works on it
  std::vector<char> discard;  // where a message of the wrong length is drained
};

/// One peer.
struct Peer {
  int rank = -1;
  int pid = -1;
  Fd pidfd;  // on this host only: readable once the peer's process has exited
  ucp_ep_h ep = nullptr;
  std::uint64_t sent = 0;      // data messages sent so far (the next send's sequence number)
  std::uint64_t posted = 0;    // receives posted so far (the next receive's sequence number)
  std::deque<Request*> recvs;  // posted, message not yet there; front()->seq is the next to probe
  std::optional<std::uint64_t> goodbye;  // the peer shut down after sending this many messages
  ucs_status_t ep_error = UCS_OK;        // set by UCX's error handler
  std::optional<Clock::time_point> exited_at;
  bool answered = false;  // a kAlive came: the peer has aborted and its process runs
  Status closed;          // not ok once nothing more can come from or go to this peer
};

/// A control message on its way out or in.
struct ControlMessage {
  std::string payload;
  void* ucp = nullptr;
  ucp_tag_t tag = 0;
};

/// The Transport over a finished set-up.
class UcxTransport final : public transports::Skeleton<Request> {
 public:
  UcxTransport(int rank, int size, const UcxOptions& options, std::unique_ptr<Ucp> ucp,
               std::vector<std::unique_ptr<Peer>> peers);
  ~UcxTransport() override;

  std::string_view name() const override { return "ucx"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool accepts_device_memory() const override { return false; }
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override;
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override;
  void wake() override;
  void abort(const Status& cause) override;

 private:
  // ucx_transport.cc
  Result<Peer*> check_peer(int peer, const void* data, std::size_t bytes);
  void complete(Request& req) { req.finish(); }
  void complete(Request& req, const Status& why) { req.finish(why); }
  /// Hands a request's UCP request back (cancelling a receive first).
  void release(Request& req) override;
  /// A timed-out wait returns the abort's cause, which names the peers that never answered it.
  Status timeout_status(const Status& timeout) override;
  void shut_down();
  void drain_unclaimed();

  // ucx_io.cc
  /// Drives UCX and hoop's matching once; true when something moved or completed.
  bool progress() override;
  /// Posts the receives of `p` whose message is there, in order.
  bool match(Peer& p);
  /// Completes the requests UCX has finished.
  bool reap();
  /// Receives and acts on control messages that arrived.
  bool read_control();
  void on_control(int source, Control kind, const std::string& payload);
  /// Fails the receives of `p` that can no longer be matched (after a goodbye).
  void fail_unmatchable(Peer& p);
  /// Looks for endpoint errors and exited peer processes.
  void check_peers() override;
  void close_peer(Peer& p, const Status& why);
  /// `cause` plus the peers that sent no kAlive within kAnswerGrace (drives UCX meanwhile).
  Status name_silent_peers(const Status& cause);
  /// Sends a control message to `p` (when its endpoint works) or to every such peer.
  void send_control(Peer& p, Control kind, std::string payload);
  void broadcast_control(Control kind, const std::string& payload);
  /// Drives UCX until every control message and endpoint close is done or `deadline` passes.
  void flush(Deadline deadline, std::vector<void*>& closing);
  /// Sleeps on the worker's event fd up to `timeout`; true unless it timed out.
  bool sleep_on_fd(std::chrono::microseconds timeout);
  /// An event fd wake-up that moves nothing (UCX's own traffic) counts as none.
  bool sleep(Clock::duration max, bool stop_on_wake) override;

  int rank_;
  int size_;
  std::unique_ptr<Ucp> ucp_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Peer*> by_rank_;  // size_ entries, null for ranks not in `peers`
  std::vector<Request*> in_flight_;  // requests with a UCP request
  std::deque<ControlMessage> control_out_;
  std::deque<ControlMessage> control_in_;
  Status aborted_;
  bool forward_abort_ = true;  // false when the cause came from a peer (every rank has it)
  bool in_progress_ = false;
};

}  // namespace hoop::ucx
