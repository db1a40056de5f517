// The TCP transport's socket I/O: batched writes, reads straight into the caller's buffer for
// large payloads, frame parsing, and what a failing socket does to the requests on it.
#include <fmt/format.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/socket.h"
#include "transports/tcp/tcp_conn.h"

namespace hoop::tcp {
namespace {

// Bytes read ahead of the current frame: headers and small payloads arrive in one syscall.
constexpr std::size_t kStageBytes = 64 << 10;
// A payload remainder at least this large is read straight into the caller's buffer.
constexpr std::size_t kDirectReadMin = 4096;
// A kAwaited payload part at least this large that arrives before its receive stays in the
// socket until the receive is posted: reading it there and copying it out later costs a second
// pass over the bytes (a 2-rank 1 MiB broadcast over loopback took twice Open MPI's time so),
// where a smaller one is cheaper staged than read later by a syscall of its own.
constexpr std::size_t kParkMin = 64 << 10;

/// Whether the data frame `c` is reading stays in the socket until its receive is posted.
bool parks(const Conn& c) {
  return c.type == wire::FrameType::kAwaited && c.part_len >= kParkMin && !c.draining;
}
// Reads per socket per call, so that one busy peer cannot starve the others.
constexpr int kMaxReadsPerCall = 64;
// Bytes one sendmsg or readv moves at most, and one call of flush_conn or read_conn before it
// returns, so that a rank both sending and receiving alternates between the two in pieces
// that stay in the core's cache: both directions of a 1 MiB exchange over loopback in whole
// 1 MiB calls ran at half the throughput of 256 KiB ones on the 2-core test machine (tcp_bound
// --io-size: 385 us against 205 us), and Open MPI's TCP transport writes 128 KiB fragments.
constexpr std::size_t kMaxIoBytes = std::size_t{256} << 10;
// How long abort() spends pushing its ABORT frames out (push_out_aborts).
constexpr std::chrono::milliseconds kAbortFlushTimeout{250};
// iovecs per sendmsg: a batch of small frames leaves in one syscall.
constexpr int kMaxIov = 64;
constexpr int kMaxEvents = 64;

}  // namespace

void TcpTransport::flush_held() {
  any_held_ = false;
  for (const auto& c : conns_)
    if (c->held) on_conn_result(*c, flush_conn(*c));
}

bool TcpTransport::progress(int timeout_ms) {
  if (any_held_) flush_held();
  epoll_event events[kMaxEvents];
  const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, timeout_ms);
  for (int i = 0; i < n; ++i) {
    if (events[i].data.ptr == nullptr) {  // wake(): reset the eventfd
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t r = ::read(wake_.get(), &count, sizeof(count));
      continue;
    }
    Conn& c = *static_cast<Conn*>(events[i].data.ptr);
    if ((events[i].events & EPOLLOUT) != 0) on_conn_result(c, flush_conn(c));
    if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
      on_conn_result(c, read_conn(c));
    }
  }
  return n > 0;
}

bool TcpTransport::sleep(Clock::duration max, bool /*stop_on_wake*/) {
  // epoll counts milliseconds: round up, so that a short sleep still sleeps rather than spins.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(max).count();
  return progress(static_cast<int>(std::clamp<std::int64_t>(ms, 0, 60000)));
}

void TcpTransport::wake() {
  wake_pending_.store(true);
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t r = ::write(wake_.get(), &one, sizeof(one));
}

bool TcpTransport::await_activity(std::chrono::microseconds timeout, bool messages) {
  const auto ms = std::clamp<std::int64_t>(
      std::chrono::ceil<std::chrono::milliseconds>(timeout).count(), 0, 60000);
  if (!wake_pending_.load()) {
    if (messages) {
      // epoll_wait may run beside another thread's; the sockets are level-triggered, so what
      // this reports stays there for the thread that moves the bytes.
      epoll_event events[kMaxEvents];
      ::epoll_wait(epoll_.get(), events, kMaxEvents, static_cast<int>(ms));
    } else {
      pollfd p{wake_.get(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(ms));
    }
  }
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t r = ::read(wake_.get(), &count, sizeof(count));
  wake_pending_.store(false);
  return true;
}

Status TcpTransport::flush_conn(Conn& c) {
  c.held = false;  // whatever writes the queue writes what send_more() held back with it
  std::size_t written = 0;
  while (c.closed.ok() && !c.sends.empty() && written < kMaxIoBytes) {
    iovec iov[kMaxIov];
    int n = 0;
    std::size_t room = kMaxIoBytes;
    for (auto it = c.sends.begin(); it != c.sends.end() && n + 2 <= kMaxIov && room > 0; ++it) {
      std::size_t off = it->sent;
      if (off < it->header_len) {
        iov[n++] = {it->header.data() + off, it->header_len - off};
        room -= std::min(room, it->header_len - off);
        off = it->header_len;
      }
      const std::size_t payload_off = off - it->header_len;
      if (payload_off < it->len && room > 0) {
        const std::size_t take = std::min(room, it->len - payload_off);
        iov[n++] = {const_cast<char*>(it->payload() + payload_off), take};
        room -= take;
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n);
    const ssize_t r = ::sendmsg(c.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EPIPE || errno == ECONNRESET) {
        return peer_lost(fmt::format(
            "tcp: {} closed the connection without shutting its transport down (the process "
            "died or the network failed; sending: {})",
            peer_name(c.peer), std::strerror(errno)));
      }
      return errno_error(fmt::format("tcp: sending to {}", peer_name(c.peer)), errno);
    }
    ++io_calls_;
    auto left = static_cast<std::size_t>(r);
    written += left;
    while (!c.sends.empty()) {
      SendPiece& p = c.sends.front();
      const std::size_t take = std::min(left, p.total() - p.sent);
      p.sent += take;
      left -= take;
      if (p.sent < p.total()) break;
      if (p.req != nullptr) --p.req->parts_left;
      c.sends.pop_front();
    }
  }
  update_epoll(c);
  return Status::success();
}

Status TcpTransport::read_conn(Conn& c) {
  if (!c.closed.ok() || c.paused) return Status::success();
  if (c.dropping) return drop_input(c);
  if (c.stage.empty()) c.stage.resize(kStageBytes);
  // A read that fills less than it asked for has emptied the socket: reading again would only
  // return EAGAIN, a syscall per message; epoll is level-triggered, so later bytes are not lost.
  bool drained = false;
  std::size_t read = 0;
  for (int round = 0; round < kMaxReadsPerCall; ++round) {
    HOOP_RETURN_IF_ERROR(consume_stage(c));
    if (!c.closed.ok() || c.paused || drained || read >= kMaxIoBytes) return Status::success();
    if (c.stage_begin > 0) {
      std::memmove(c.stage.data(), c.stage.data() + c.stage_begin, c.stage_end - c.stage_begin);
      c.stage_end -= c.stage_begin;
      c.stage_begin = 0;
    }
    iovec iov[2];
    int n = 0;
    std::size_t direct = 0;
    if (c.sink == Sink::kPiece && c.stage_end == 0 && c.part_len - c.got >= kDirectReadMin) {
      direct = std::min(c.part_len - c.got, kMaxIoBytes);
      iov[n++] = {c.piece.req->data + c.piece.offset + c.got, direct};
    }
    iov[n++] = {c.stage.data() + c.stage_end, c.stage.size() - c.stage_end};
    const std::size_t asked = direct + (c.stage.size() - c.stage_end);
    const ssize_t r = ::readv(c.fd.get(), iov, n);
    if (r > 0) {
      ++io_calls_;
      read += static_cast<std::size_t>(r);
      const std::size_t to_user = std::min(static_cast<std::size_t>(r), direct);
      if (to_user > 0) {
        c.got += to_user;
        if (c.got == c.part_len) finish_frame(c);
      }
      c.stage_end += static_cast<std::size_t>(r) - to_user;
      drained = static_cast<std::size_t>(r) < asked;
      continue;
    }
    if (r == 0) {
      return peer_lost(fmt::format(
          "tcp: {} closed the connection without shutting its transport down (the process died "
          "or the network failed)",
          peer_name(c.peer)));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::success();
    if (errno == ECONNRESET) {
      return peer_lost(
          fmt::format("tcp: {} reset the connection (the process died or the network failed)",
                      peer_name(c.peer)));
    }
    return errno_error(fmt::format("tcp: reading from {}", peer_name(c.peer)), errno);
  }
  // The last round's bytes are still staged, and the socket may hold nothing more to wake the
  // reader for them.
  return consume_stage(c);
}

Status TcpTransport::drop_input(Conn& c) {
  char sink[16384];
  for (std::size_t read = 0; read < kMaxIoBytes;) {
    const ssize_t r = ::recv(c.fd.get(), sink, sizeof sink, MSG_DONTWAIT);
    if (r > 0) {
      read += static_cast<std::size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return peer_lost(fmt::format("tcp: {} closed the connection", peer_name(c.peer)));
  }
  return Status::success();
}

void TcpTransport::push_out_aborts() {
  const auto deadline = net::deadline_after(kAbortFlushTimeout);
  std::vector<pollfd> fds;
  std::vector<Conn*> which;
  while (net::Clock::now() < deadline) {
    fds.clear();
    which.clear();
    for (auto& c : conns_) {
      if (!c->closed.ok() || c->sends.empty()) continue;
      fds.push_back({c->fd.get(), POLLOUT | POLLIN, 0});
      which.push_back(c.get());
    }
    if (fds.empty()) return;
    if (::poll(fds.data(), fds.size(), static_cast<int>(net::remaining(deadline).count())) <= 0)
      continue;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      Conn& c = *which[i];
      Status s;
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) s = drop_input(c);
      if (s.ok() && (fds[i].revents & POLLOUT) != 0) s = flush_conn(c);
      if (!s.ok()) close_conn(c, s);
    }
  }
}

Status TcpTransport::consume_stage(Conn& c) {
  while (c.closed.ok()) {
    const std::size_t avail = c.stage_end - c.stage_begin;
    if (c.sink == Sink::kHeader) {
      if (avail < wire::kFrameHeaderBytes) break;
      auto h = wire::decode_frame_header(c.stage.data() + c.stage_begin);
      if (!h.ok()) {
        return protocol_error(fmt::format("tcp: {} sent a malformed frame: {}", peer_name(c.peer),
                                          h.status().message()));
      }
      c.stage_begin += wire::kFrameHeaderBytes;
      HOOP_RETURN_IF_ERROR(start_frame(c, *h));
      continue;
    }
    if (must_pause(c)) {
      c.paused = true;
      update_epoll(c);
      break;
    }
    if (avail == 0) break;
    const std::size_t take = std::min(avail, c.part_len - c.got);
    deliver(c, c.stage.data() + c.stage_begin, take);
    c.stage_begin += take;
    if (c.got == c.part_len) finish_frame(c);
  }
  if (c.stage_begin == c.stage_end) c.stage_begin = c.stage_end = 0;
  return Status::success();
}

Status TcpTransport::start_frame(Conn& c, const wire::FrameHeader& h) {
  c.type = h.type;
  c.total = h.length;
  c.got = 0;
  c.part_len = 0;
  switch (h.type) {
    case wire::FrameType::kGoodbye:
      c.goodbye_received = true;
      c.sink = Sink::kHeader;
      return Status::success();
    case wire::FrameType::kAbort:
      c.part_len = static_cast<std::size_t>(h.length);
      c.abort_payload.clear();
      c.sink = Sink::kAbort;
      return Status::success();
    case wire::FrameType::kData:
    case wire::FrameType::kAwaited:
      break;
  }
  c.part_len = wire::stripe_part(h.length, c.index, sockets_per_peer_).size;
  if (!aborted_.ok()) {
    c.sink = Sink::kDiscard;
  } else if (c.unexpected.empty() && !c.recvs.empty()) {
    const RecvPiece p = c.recvs.front();
    c.recvs.pop_front();
    if (p.req->bytes != h.length) {
      fail_part(*p.req, protocol_error(fmt::format(
                            "tcp: {} sent a message of {} bytes but the matching receive on "
                            "rank {} expects {} bytes",
                            peer_name(c.peer), h.length, rank_, p.req->bytes)));
      c.sink = Sink::kDiscard;
    } else {
      c.sink = Sink::kPiece;
      c.piece = p;
    }
  } else {
    // A part left in the socket needs no buffer.
    c.unexpected.push_back(
        Unexpected{h.length, c.part_len, parks(c) ? std::string() : take_buffer(c.part_len)});
    c.sink = Sink::kUnexpected;
  }
  if (c.part_len == 0) finish_frame(c);
  return Status::success();
}

void TcpTransport::deliver(Conn& c, const char* src, std::size_t n) {
  switch (c.sink) {
    case Sink::kPiece:
      std::memcpy(c.piece.req->data + c.piece.offset + c.got, src, n);
      break;
    case Sink::kUnexpected:
      c.unexpected.back().bytes.append(src, n);
      c.unexpected_bytes += n;
      break;
    case Sink::kAbort:
      c.abort_payload.append(src, n);
      break;
    case Sink::kDiscard:
    case Sink::kHeader:
      break;
  }
  c.got += n;
}

void TcpTransport::finish_frame(Conn& c) {
  const Sink sink = c.sink;
  c.sink = Sink::kHeader;
  if (sink == Sink::kPiece) {
    --c.piece.req->parts_left;
  } else if (sink == Sink::kAbort) {
    const Status cause = wire::decode_abort(c.abort_payload);
    abort(Status(cause.code(), fmt::format("{} aborted: {}", peer_name(c.peer), cause.message())));
  }
}

void TcpTransport::on_conn_result(Conn& c, const Status& result) {
  if (result.ok()) return;
  if (aborted_.ok() && c.closed.ok()) {
    // A write can fail before the frames already received on the socket are read; one of
    // them may be the peer's ABORT carrying the first cause, which beats "connection closed".
    // So everything the socket holds is read now, past read_conn's per-call budget and into
    // buffers for a payload that would otherwise stay parked (the connection is lost anyway):
    // behind 1 MiB of data, a peer's ABORT went unread and the wrong rank was blamed.
    c.draining = true;
    c.paused = false;
    for (std::uint64_t before = ~io_calls_; before != io_calls_ && c.closed.ok() && !c.paused;) {
      before = io_calls_;
      if (!read_conn(c).ok()) break;
    }
  }
  if (c.goodbye_received && result.code() == StatusCode::kPeerLost) {
    // An orderly shutdown: only what was still expected on this socket fails.
    close_conn(c, peer_lost(fmt::format("tcp: {} shut its transport down", peer_name(c.peer))));
    return;
  }
  close_conn(c, result);
  abort(result);
}

void TcpTransport::close_conn(Conn& c, const Status& why) {
  if (!c.closed.ok()) return;
  c.closed = why;
  for (SendPiece& p : c.sends)
    if (p.req != nullptr) fail_part(*p.req, why);
  c.sends.clear();
  for (RecvPiece& p : c.recvs) fail_part(*p.req, why);
  c.recvs.clear();
  if (c.sink == Sink::kPiece) fail_part(*c.piece.req, why);
  if (c.sink == Sink::kUnexpected) {
    c.unexpected_bytes -= c.unexpected.back().bytes.size();
    recycle(std::move(c.unexpected.back().bytes));
    c.unexpected.pop_back();
  }
  c.sink = Sink::kHeader;
  c.paused = false;
  update_epoll(c);
  c.fd.reset();
}

void TcpTransport::update_epoll(Conn& c) {
  std::uint32_t want = 0;
  if (c.closed.ok() && c.fd.valid()) {
    if (!c.paused) want |= EPOLLIN;
    if (!c.sends.empty()) want |= EPOLLOUT;
  }
  if (want == 0) {
    if (c.registered) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
    c.registered = false;
    c.epoll_events = 0;
    return;
  }
  if (c.registered && want == c.epoll_events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.ptr = &c;
  if (::epoll_ctl(epoll_.get(), c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd.get(), &ev) !=
      0) {
    // Leave the socket unwatched: its requests then end at their wait deadline.
    c.closed = errno_error(fmt::format("tcp: epoll_ctl for {}", peer_name(c.peer)), errno);
    return;
  }
  c.registered = true;
  c.epoll_events = want;
}

std::string TcpTransport::take_buffer(std::size_t want) {
  std::string buffer;
  if (!spare_.empty()) {
    auto best = std::max_element(spare_.begin(), spare_.end(), [](const auto& a, const auto& b) {
      return a.capacity() < b.capacity();
    });
    buffer = std::move(*best);
    spare_.erase(best);
    spare_bytes_ -= buffer.capacity();
  }
  // The frame's declared length is the peer's word: reserve no more than the pause limit.
  buffer.reserve(std::min(want, unexpected_cap_));
  return buffer;
}

void TcpTransport::recycle(std::string&& buffer) {
  constexpr std::size_t kMaxSpares = 16;
  buffer.clear();
  if (buffer.capacity() < kDirectReadMin || spare_.size() >= kMaxSpares ||
      spare_bytes_ + buffer.capacity() > unexpected_cap_) {
    return;
  }
  spare_bytes_ += buffer.capacity();
  spare_.push_back(std::move(buffer));
}

bool TcpTransport::must_pause(const Conn& c) const {
  return c.sink == Sink::kUnexpected && (c.unexpected_bytes >= unexpected_cap_ || parks(c));
}

void TcpTransport::resume_if_drained(Conn& c) {
  if (c.paused && !must_pause(c)) {
    c.paused = false;
    update_epoll(c);
    // Bytes read before the pause wait in the staging buffer. A peer that has sent everything
    // sends nothing more to wake the reader for them (epoll sees the socket, not this buffer),
    // so they are delivered now: a 4-rank gather over tcp stalled to its deadline on this.
    if (c.stage_end > c.stage_begin) on_conn_result(c, consume_stage(c));
  }
}

}  // namespace hoop::tcp
