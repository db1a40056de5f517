// The TCP transport's internal state: requests, the pieces of them queued on each socket,
// and the per-socket framing state (internal to transports/tcp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/fd.h"
#include "hoop/transport.h"
#include "transports/skeleton.h"
#include "transports/tcp/tcp_mesh.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/tcp/tcp_wire.h"

namespace hoop::tcp {

/// One posted send or receive; complete once no socket holds a piece of it.
struct Request : transports::RequestBase {
  int parts_left = 0;  // a request spans sockets: it is done when this reaches 0
};

/// One socket's part of a message to send, or an owned control frame (req == nullptr).
struct SendPiece {
  Request* req = nullptr;
  std::array<char, wire::kFrameHeaderBytes> header{};
  std::size_t header_len = 0;
  const char* data = nullptr;
  std::size_t len = 0;
  std::string owned;  // the bytes when req == nullptr (header_len is then 0)
  std::size_t sent = 0;

  std::size_t total() const { return header_len + len; }
  const char* payload() const { return req == nullptr ? owned.data() : data; }
};

/// One socket's part of a posted receive.
struct RecvPiece {
  Request* req = nullptr;
  std::size_t offset = 0;  // into req->data
  std::size_t len = 0;
};

/// A data frame that arrived before its receive was posted.
struct Unexpected {
  std::uint64_t total = 0;  // the whole message's length as the sender declared it
  std::size_t part_len = 0;
  std::string bytes;  // complete when bytes.size() == part_len
};

/// Where the payload of the frame being read goes.
enum class Sink { kHeader, kPiece, kUnexpected, kDiscard, kAbort };

/// One socket to one peer.
struct Conn {
  int peer = -1;
  int index = 0;
  Fd fd;
  std::string address;
  std::deque<SendPiece> sends;
  std::deque<RecvPiece> recvs;
  std::deque<Unexpected> unexpected;  // back() is being read when sink == kUnexpected
  std::size_t unexpected_bytes = 0;
  // The frame being read.
  Sink sink = Sink::kHeader;
  wire::FrameType type = wire::FrameType::kData;
  std::uint64_t total = 0;
  std::size_t part_len = 0;
  std::size_t got = 0;
  RecvPiece piece;  // sink == kPiece
  std::string abort_payload;
  // Bytes read ahead of the current frame's sink (headers and small payloads).
  std::vector<char> stage;
  std::size_t stage_begin = 0;
  std::size_t stage_end = 0;
  bool goodbye_received = false;
  bool paused = false;  // not read until a receive takes buffered data off it
  bool draining = false;  // lost: read everything left, parking nothing (on_conn_result)
  bool dropping = false;  // aborted: what arrives is read off unparsed (drop_input)
  bool held = false;    // its queued sends wait for the next one (send_more)
  Status closed;        // not ok once the socket is unusable
  std::uint32_t epoll_events = 0;
  bool registered = false;
};

/// The Transport over the sockets of a finished mesh.
class TcpTransport final : public transports::Skeleton<Request> {
 public:
  /// Takes over the mesh's sockets; fails when the epoll set cannot be made.
  static Result<std::unique_ptr<Transport>> create(std::vector<PeerSocket> sockets,
                                                   const MeshParams& params);
  ~TcpTransport() override;

  std::string_view name() const override { return "tcp"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool accepts_device_memory() const override { return false; }
  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override {
    return post_send(peer, data, bytes, false);
  }
  Result<RequestId> send_more(int peer, const void* data, std::size_t bytes) override {
    return post_send(peer, data, bytes, true);
  }
  Result<RequestId> send_lent(int peer, const void* data, std::size_t bytes) override {
    return post_send(peer, data, bytes, false, true);
  }
  Result<RequestId> send_awaited(int peer, const void* data, std::size_t bytes) override {
    return post_send(peer, data, bytes, false, true);
  }
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override;
  void wake() override;
  bool await_activity(std::chrono::microseconds timeout, bool messages) override;
  void abort(const Status& cause) override;

 private:
  TcpTransport(int rank, int size, int sockets_per_peer, std::size_t unexpected_cap);

  // tcp_transport.cc
  Status check_peer(int peer, const void* data, std::size_t bytes) const;
  void fail_part(Request& req, const Status& why);
  void post_recv_piece(Conn& c, RecvPiece piece);
  /// "rank P (host:port)".
  std::string peer_name(int peer) const override;
  bool finished(const Request& r) const override { return r.parts_left == 0; }
  void begin_wait(std::span<const RequestId> ids) override { sole_ = sole_conn(ids); }
  bool spin_once() override { return sole_ != nullptr ? poll_conn(*sole_) : progress(0); }
  /// epoll_wait moves the bytes itself: a sleep ends once a socket (or wake()) is ready.
  bool sleep(Clock::duration max, bool stop_on_wake) override;
  Clock::duration sleep_slice() const override { return std::chrono::seconds(1); }

  /// The one socket that every unfinished request of `ids` uses, when no other socket has
  /// bytes to send: polling it directly saves the epoll_wait per message. Else null.
  Conn* sole_conn(std::span<const RequestId> ids);
  /// Moves what `c`'s socket allows now, without epoll; true when bytes moved.
  bool poll_conn(Conn& c);

  // tcp_io.cc
  /// Waits up to `timeout_ms` for socket events and moves bytes for every ready socket;
  /// true when some socket was ready.
  bool progress(int timeout_ms);
  /// send(), send_more(), send_lent() and send_awaited(): with `hold`, an idle connection's
  /// write waits for the next send; `awaited` frames it as kAwaited.
  Result<RequestId> post_send(int peer, const void* data, std::size_t bytes, bool hold,
                              bool awaited = false);
  /// Writes what send_more() held back.
  void flush_held();
  bool progress() override { return progress(0); }
  /// Writes as much of `c`'s queue as the socket takes now.
  Status flush_conn(Conn& c);
  /// Reads everything `c`'s socket holds now, delivering frames.
  Status read_conn(Conn& c);
  /// After abort(): reads what `c`'s socket holds now and drops it, frames unparsed.
  Status drop_input(Conn& c);
  /// abort()'s last step: writes the queued frames (the ABORTs) for a bounded time, dropping
  /// what arrives meanwhile.
  void push_out_aborts();
  Status consume_stage(Conn& c);
  Status start_frame(Conn& c, const wire::FrameHeader& h);
  void deliver(Conn& c, const char* src, std::size_t n);
  void finish_frame(Conn& c);
  /// Handles a failed socket: an orderly close fails its pieces, anything else aborts.
  void on_conn_result(Conn& c, const Status& result);
  /// Fails every piece on `c` with `why` and stops using its socket.
  void close_conn(Conn& c, const Status& why);
  void update_epoll(Conn& c);
  /// Whether `c` must stop reading: the frame being read has no receive yet and either the
  /// unexpected bytes have reached the cap or it is a large kAwaited one (left in the socket,
  /// unless the connection is being drained after a failure).
  bool must_pause(const Conn& c) const;
  void resume_if_drained(Conn& c);
  /// A buffer for an unexpected frame, reused from earlier ones so that large messages that
  /// arrive early do not fault in fresh pages on every call.
  std::string take_buffer(std::size_t want);
  /// Returns an unexpected frame's buffer to the pool (bounded by unexpected_cap_).
  void recycle(std::string&& buffer);
  /// The sockets to `peer`.
  std::span<const std::unique_ptr<Conn>> peer_conns(int peer) const;

  int rank_;
  int size_;
  int sockets_per_peer_;
  std::size_t unexpected_cap_;
  Conn* sole_ = nullptr;  // the wait in progress: sole_conn() of its requests
  std::vector<std::string> spare_;  // empty buffers with capacity, for unexpected frames
  std::size_t spare_bytes_ = 0;
  std::uint64_t io_calls_ = 0;  // sendmsg and readv calls that moved bytes
  Fd epoll_;
  Fd wake_;                                   // an eventfd in the epoll set: wake() ends a poll()
  bool any_held_ = false;  // some connection holds sends back (send_more)
  std::vector<std::unique_ptr<Conn>> conns_;  // peer-major: conns_[slot_[peer] * k + index]
  std::vector<int> slot_;                     // peer -> its connections' slot, -1: none
  Status aborted_;
};

}  // namespace hoop::tcp
