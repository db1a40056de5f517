#include "transports/tcp/tcp_transport.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "core/config.h"
#include "core/socket.h"
#include "transports/tcp/tcp_conn.h"

namespace hoop::tcp {
namespace {

// How long the destructor spends pushing the last frames (ABORT, GOODBYE) out.
constexpr std::chrono::milliseconds kFinalFlushTimeout{1000};
// Frames that arrive before their receive is posted are buffered up to this many times the
// socket buffer size per socket.
constexpr std::size_t kUnexpectedCapFactor = 4;

}  // namespace

Result<std::unique_ptr<Transport>> TcpTransport::create(std::vector<PeerSocket> sockets,
                                                        const MeshParams& params) {
  const int k = params.options.sockets_per_peer;
  const std::size_t cap =
      std::max<std::size_t>(params.options.socket_buffer_bytes, 1 << 20) * kUnexpectedCapFactor;
  std::unique_ptr<TcpTransport> t(new TcpTransport(params.rank, params.size, k, cap));
  t->spin_ = params.options.spin;
  t->epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!t->epoll_.valid()) return errno_error("epoll_create1", errno);
  t->wake_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!t->wake_.valid()) return errno_error("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // not a connection
  if (::epoll_ctl(t->epoll_.get(), EPOLL_CTL_ADD, t->wake_.get(), &ev) != 0)
    return errno_error("epoll_ctl for the wake-up eventfd", errno);
  const std::vector<int> peers = params.peer_list();
  t->slot_.assign(params.size, -1);
  for (std::size_t i = 0; i < peers.size(); ++i) t->slot_[peers[i]] = static_cast<int>(i);
  t->conns_.resize(peers.size() * k);
  for (PeerSocket& s : sockets) {
    const int slot = t->slot_[s.peer];
    auto c = std::make_unique<Conn>();
    c->peer = s.peer;
    c->index = s.index;
    c->fd = std::move(s.fd);
    c->address = std::move(s.address);
    t->conns_[static_cast<std::size_t>(slot) * k + s.index] = std::move(c);
  }
  for (auto& c : t->conns_) {
    if (c == nullptr) return internal_error("tcp: the mesh is missing a connection");
    t->update_epoll(*c);
    if (!c->closed.ok()) return c->closed;
  }
  return std::unique_ptr<Transport>(std::move(t));
}

TcpTransport::TcpTransport(int rank, int size, int sockets_per_peer, std::size_t unexpected_cap)
    : rank_(rank),
      size_(size),
      sockets_per_peer_(sockets_per_peer),
      unexpected_cap_(unexpected_cap) {}

TcpTransport::~TcpTransport() {
  if (sends_pending()) {
    abort(aborted(fmt::format("rank {} shut its tcp transport down with sends pending", rank_)));
  }
  if (aborted_.ok()) {
    for (auto& c : conns_) {
      if (!c->closed.ok()) continue;
      SendPiece goodbye;
      goodbye.owned.assign(wire::kFrameHeaderBytes, '\0');
      wire::encode_frame_header(wire::FrameType::kGoodbye, 0, goodbye.owned.data());
      goodbye.len = goodbye.owned.size();
      c->sends.push_back(std::move(goodbye));
    }
  }
  // Push the last frames out for a bounded time; a peer that does not read loses them.
  const auto deadline = net::deadline_after(kFinalFlushTimeout);
  while (net::Clock::now() < deadline) {
    std::vector<pollfd> fds;
    for (auto& c : conns_) {
      if (c->closed.ok() && !c->sends.empty()) {
        if (!flush_conn(*c).ok()) c->closed = peer_lost("closed");
        if (c->closed.ok() && !c->sends.empty()) fds.push_back({c->fd.get(), POLLOUT, 0});
      }
    }
    if (fds.empty()) break;
    (void)::poll(fds.data(), fds.size(), static_cast<int>(net::remaining(deadline).count()));
  }
  // Closing a socket with unread bytes makes the kernel reset the connection, which can
  // destroy what the peer has not read yet; so read off what is there before closing.
  char sink[4096];
  for (auto& c : conns_) {
    if (!c->fd.valid()) continue;
    ::shutdown(c->fd.get(), SHUT_WR);
    for (int i = 0; i < 256 && ::recv(c->fd.get(), sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
    }
  }
}

std::string TcpTransport::peer_name(int peer) const {
  const int slot = slot_[peer];
  return fmt::format("rank {} ({})", peer,
                     conns_[static_cast<std::size_t>(slot) * sockets_per_peer_]->address);
}

std::span<const std::unique_ptr<Conn>> TcpTransport::peer_conns(int peer) const {
  const int slot = slot_[peer];
  return std::span(conns_).subspan(static_cast<std::size_t>(slot) * sockets_per_peer_,
                                   static_cast<std::size_t>(sockets_per_peer_));
}

Status TcpTransport::check_peer(int peer, const void* data, std::size_t bytes) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return invalid_argument(fmt::format(
        "tcp: peer {} is not another rank of this job (rank {} of {})", peer, rank_, size_));
  }
  if (slot_[peer] < 0) {
    return invalid_argument(
        fmt::format("tcp: rank {} has no tcp connection to rank {} (another transport serves "
                    "that pair)",
                    rank_, peer));
  }
  if (data == nullptr && bytes > 0) return invalid_argument("tcp: null buffer");
  return aborted_;
}

void TcpTransport::fail_part(Request& req, const Status& why) {
  if (req.status.ok()) req.status = why;
  --req.parts_left;
}

Result<RequestId> TcpTransport::post_send(int peer, const void* data, std::size_t bytes,
                                          bool hold, bool awaited) {
  HOOP_RETURN_IF_ERROR(check_peer(peer, data, bytes));
  auto [id, req] = add_request(peer, true, data, bytes);
  req.parts_left = sockets_per_peer_;
  for (const auto& c : peer_conns(peer)) {
    // An earlier socket's eager write may have failed and aborted the transport.
    if (!aborted_.ok() || !c->closed.ok()) {
      fail_part(req, aborted_.ok() ? c->closed : aborted_);
      continue;
    }
    const wire::Part part = wire::stripe_part(bytes, c->index, sockets_per_peer_);
    SendPiece piece;
    piece.req = &req;
    wire::encode_frame_header(awaited ? wire::FrameType::kAwaited : wire::FrameType::kData,
                              bytes, piece.header.data());
    piece.header_len = wire::kFrameHeaderBytes;
    piece.data = static_cast<const char*>(data) + part.offset;
    piece.len = part.size;
    const bool was_idle = c->sends.empty();
    c->sends.push_back(std::move(piece));
    if (hold && was_idle) {
      c->held = true;
      any_held_ = true;
      continue;
    }
    // Eager: try the socket now (with what an earlier send_more held back); a busy one is
    // written from wait().
    if (was_idle || c->held) on_conn_result(*c, flush_conn(*c));
  }
  return id;
}

Result<RequestId> TcpTransport::recv(int peer, void* data, std::size_t bytes) {
  HOOP_RETURN_IF_ERROR(check_peer(peer, data, bytes));
  auto [id, req] = add_request(peer, false, data, bytes);
  req.parts_left = sockets_per_peer_;
  for (const auto& c : peer_conns(peer)) {
    const wire::Part part = wire::stripe_part(bytes, c->index, sockets_per_peer_);
    post_recv_piece(*c, RecvPiece{&req, part.offset, part.size});
  }
  return id;
}

void TcpTransport::post_recv_piece(Conn& c, RecvPiece piece) {
  Request& req = *piece.req;
  if (!aborted_.ok()) {
    fail_part(req, aborted_);
    return;
  }
  if (c.unexpected.empty()) {
    if (!c.closed.ok()) {
      fail_part(req, c.closed);
    } else {
      c.recvs.push_back(piece);
    }
    return;
  }
  Unexpected& u = c.unexpected.front();
  const bool being_read = c.sink == Sink::kUnexpected && c.unexpected.size() == 1;
  if (u.total != req.bytes) {
    fail_part(req, protocol_error(fmt::format(
                       "tcp: {} sent a message of {} bytes but the matching receive on rank {} "
                       "expects {} bytes",
                       peer_name(c.peer), u.total, rank_, req.bytes)));
    if (being_read) c.sink = Sink::kDiscard;
  } else {
    if (!u.bytes.empty()) std::memcpy(req.data + piece.offset, u.bytes.data(), u.bytes.size());
    if (being_read) {
      c.sink = Sink::kPiece;
      c.piece = piece;
    } else {
      --req.parts_left;
    }
  }
  c.unexpected_bytes -= u.bytes.size();
  recycle(std::move(u.bytes));
  c.unexpected.pop_front();
  resume_if_drained(c);
}

Conn* TcpTransport::sole_conn(std::span<const RequestId> ids) {
  if (sockets_per_peer_ != 1) return nullptr;
  int peer = -1;
  for (RequestId id : ids) {
    const Request& r = requests_.at(id);
    if (r.parts_left == 0) continue;
    if (peer >= 0 && r.peer != peer) return nullptr;
    peer = r.peer;
  }
  if (peer < 0) return nullptr;
  Conn* sole = peer_conns(peer).front().get();
  // Bytes queued for another peer must keep moving while this wait polls.
  for (const auto& c : conns_) {
    if (c.get() != sole && !c->sends.empty()) return nullptr;
  }
  return sole;
}

bool TcpTransport::poll_conn(Conn& c) {
  const std::uint64_t before = io_calls_;
  if (!c.sends.empty()) on_conn_result(c, flush_conn(c));
  on_conn_result(c, read_conn(c));
  return io_calls_ != before;
}

void TcpTransport::abort(const Status& cause) {
  if (!aborted_.ok()) return;
  aborted_ = cause.ok() ? aborted("tcp: aborted without a cause") : cause;
  const std::string frame = wire::encode_abort(aborted_);
  for (auto& c : conns_) {
    // A frame already partly on the wire is finished from an owned copy, so the ABORT that
    // follows it is framed correctly and the caller's buffer is free once wait() returns.
    std::deque<SendPiece> keep;
    for (SendPiece& p : c->sends) {
      if (p.req == nullptr || p.sent > 0) {
        if (p.req != nullptr) {
          std::string rest(p.header.data(), p.header_len);
          rest.append(p.data, p.len);
          fail_part(*p.req, aborted_);
          SendPiece copy;
          copy.owned = rest.substr(p.sent);
          copy.len = copy.owned.size();
          keep.push_back(std::move(copy));
        } else {
          keep.push_back(std::move(p));
        }
      } else {
        fail_part(*p.req, aborted_);
      }
    }
    c->sends = std::move(keep);
    for (const RecvPiece& p : c->recvs) fail_part(*p.req, aborted_);
    c->recvs.clear();
    if (c->sink == Sink::kPiece) {
      fail_part(*c->piece.req, aborted_);
      c->sink = Sink::kDiscard;
    }
    c->unexpected.clear();
    c->unexpected_bytes = 0;
    if (c->sink == Sink::kUnexpected) c->sink = Sink::kDiscard;
    c->paused = false;
    if (!c->closed.ok()) continue;
    SendPiece abort_frame;
    abort_frame.owned = frame;
    abort_frame.len = frame.size();
    c->sends.push_back(std::move(abort_frame));
    c->dropping = true;
    const Status s = flush_conn(*c);
    if (!s.ok()) close_conn(*c, s);
  }
  // A rank may end right after it aborts (a program that reports and exits): an ABORT queued
  // behind a frame still partly unsent would go with it, and its peers would blame this rank
  // for closing the connection (a 3-rank test, 1 MiB transfers, a rank killed: the survivor
  // that saw the death first was blamed by the other). So the frames are pushed out for a
  // bounded time, while what the peers send is dropped, so that two ranks aborting at once,
  // each writing to the other, do not block each other.
  push_out_aborts();
}

Result<TcpOptions> tcp_options_from_env() {
  TcpOptions o;
  auto iface = config::get_string("HOOP_IFACE");
  if (iface.ok()) {
    o.iface = *iface;
  } else if (iface.status().code() != StatusCode::kNotFound) {
    return iface.status();
  }
  HOOP_ASSIGN_OR_RETURN(const std::int64_t sockets, config::get_int("HOOP_TCP_SOCKETS_PER_PEER"));
  o.sockets_per_peer = static_cast<int>(sockets);
  HOOP_ASSIGN_OR_RETURN(const std::int64_t buffer, config::get_int("HOOP_TCP_BUFFER_BYTES"));
  o.socket_buffer_bytes = static_cast<std::size_t>(buffer);
  HOOP_ASSIGN_OR_RETURN(const std::int64_t spin, config::get_int("HOOP_SPIN_US"));
  o.spin = std::chrono::microseconds(spin);
  HOOP_ASSIGN_OR_RETURN(o.connect_timeout, config::get_milliseconds("HOOP_START_TIMEOUT"));
  return o;
}

Result<std::unique_ptr<Transport>> connect_mesh(Store& store, int rank, int size,
                                                const std::string& secret,
                                                const std::string& job_id,
                                                const TcpOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return invalid_argument(fmt::format("tcp: rank {} of {} is not a valid rank", rank, size));
  }
  if (secret.empty()) return invalid_argument("tcp: the job secret must not be empty");
  if (options.sockets_per_peer < 1 || options.sockets_per_peer > 64) {
    return invalid_argument(
        fmt::format("tcp: sockets_per_peer {} is not between 1 and 64", options.sockets_per_peer));
  }
  if (job_id.size() > wire::kMaxIdBytes || options.key_prefix.size() > wire::kMaxIdBytes ||
      options.key_prefix.empty()) {
    return invalid_argument("tcp: job id or key prefix empty or too long");
  }
  for (std::size_t i = 0; i < options.peers.size(); ++i) {
    const int p = options.peers[i];
    if (p < 0 || p >= size || p == rank || (i > 0 && p <= options.peers[i - 1]))
      return invalid_argument(fmt::format(
          "tcp: the peer list must name other ranks of the job in ascending order (rank {} of "
          "{}, entry {} is {})",
          rank, size, i, p));
  }
  MeshParams params{rank, size, secret, job_id, options};
  HOOP_ASSIGN_OR_RETURN(auto sockets, build_mesh(store, params));
  return TcpTransport::create(std::move(sockets), params);
}

}  // namespace hoop::tcp
