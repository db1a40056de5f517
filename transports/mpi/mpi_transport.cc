// The MPI transport's requests: chunked sends, probe-matched receives, progress, waiting,
// abort and goodbye over the control communicator (see mpi_transport.h).
#include "transports/mpi/mpi_transport.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <deque>
#include <thread>

#include "core/request_table.h"
#include "core/requests.h"
#include "transports/mpi/mpi_world.h"

namespace hoop::mpi {
namespace {

// Data tags: every chunk of a message but its last, and the last one.
constexpr int kMore = 1;
constexpr int kLast = 2;
// The control communicator's one tag.
constexpr int kControl = 3;
// Longest abort cause sent to peers.
constexpr std::size_t kMaxCause = 1024;
// How long the destructor waits for its goodbyes and abort() for in-flight transfers.
constexpr auto kDrain = std::chrono::milliseconds(500);

enum class ControlKind : std::uint8_t { kAbort = 1, kGoodbye = 2 };

// One control message: an abort with its cause, or a goodbye with the chunk count.
struct ControlFrame {
  std::uint32_t serial = 0;
  ControlKind kind = ControlKind::kAbort;
  std::uint8_t code = 0;
  std::uint16_t length = 0;
  std::uint64_t chunks = 0;
  char text[kMaxCause] = {};
};
constexpr int kFrameHeader = static_cast<int>(offsetof(ControlFrame, text));

class MpiTransport final : public Transport {
 public:
  MpiTransport(int rank, int size, MPI_Comm data, MPI_Comm control, const MpiOptions& options)
      : rank_(rank),
        size_(size),
        options_(options),
        serial_(next_serial()),
        data_(data),
        control_(control),
        peers_(static_cast<std::size_t>(size)) {
    post_control_recv();
  }
  ~MpiTransport() override;

  std::string_view name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool accepts_device_memory() const override { return false; }

  Result<RequestId> send(int peer, const void* data, std::size_t bytes) override;
  Result<RequestId> recv(int peer, void* data, std::size_t bytes) override;
  Status wait(std::span<const RequestId> ids, Deadline deadline) override;
  Result<bool> test(RequestId id) override;
  void poll(std::chrono::microseconds timeout) override;
  void wake() override { woken_ = true; }
  void abort(const Status& cause) override {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    abort_locked(cause.ok() ? aborted("mpi: aborted without a cause") : cause, true);
  }

 private:
  struct Request {
    bool is_send = false;
    int peer = 0;
    std::size_t bytes = 0;
    char* data = nullptr;
    bool done = false;
    Status status;
    std::vector<MPI_Request> parts;  // a send's chunks; a receive's one chunk in flight
    // Receives: bytes accepted into `data`, bytes the sender's message has had so far, whether
    // its last chunk was matched, and where a surplus goes.
    std::size_t offset = 0;
    std::size_t seen = 0;
    bool last_matched = false;
    std::shared_ptr<std::vector<char>> scratch;
  };
  struct Peer {
    std::deque<RequestId> recvs;  // pending receives in the order posted
    std::uint64_t chunks_sent = 0;
    std::uint64_t chunks_received = 0;
    bool said_goodbye = false;
    std::uint64_t goodbye_chunks = 0;
    Status failed;  // ok while the peer is usable
  };

  Status check_args(int peer, const void* data, std::size_t bytes, const char* what) const;
  bool progress();
  bool progress_control();
  /// Whether every peer has said goodbye (so sends no more control messages).
  bool goodbyes_in() const;
  bool progress_sends();
  bool progress_recvs(int peer);
  void finish(Request& r, Status status);
  void fail_peer(int peer, const Status& cause);
  void abort_locked(const Status& cause, bool tell_peers);
  void send_control(int peer, ControlKind kind, const Status& cause, std::uint64_t chunks);
  void post_control_recv();
  void drain(std::vector<MPI_Request>& requests, std::chrono::milliseconds bound);
  std::string describe(const Request& r) const;

  const int rank_;
  const int size_;
  const MpiOptions options_;
  const std::uint32_t serial_;
  MPI_Comm data_;
  MPI_Comm control_;
  std::vector<Peer> peers_;
  RequestTable<Request> requests_;
  Status aborted_;
  std::atomic<bool> woken_{false};
  MPI_Request control_recv_ = MPI_REQUEST_NULL;
  ControlFrame control_in_;
  std::vector<MPI_Request> control_sends_;
  std::deque<ControlFrame> control_out_;  // deque: frames stay put while sends are in flight
  // Transfers still moving bytes of requests that already failed, and their scratch buffers.
  std::vector<MPI_Request> draining_;
  std::vector<std::shared_ptr<std::vector<char>>> draining_buffers_;
};

MpiTransport::~MpiTransport() {
  std::lock_guard<std::mutex> lock(mpi_mutex());
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI is gone (exit): nothing left to release
  const bool pending = requests_.any_of([](const Request& r) { return !r.done; });
  if (pending && aborted_.ok())
    abort_locked(aborted(fmt::format("rank {} shut its mpi transport down with requests pending",
                                     rank_)),
                 true);
  for (int p = 0; p < size_; ++p)
    if (p != rank_) send_control(p, ControlKind::kGoodbye, Status::success(),
                                 peers_[static_cast<std::size_t>(p)].chunks_sent);
  drain(control_sends_, kDrain);
  drain(draining_, kDrain);
  // A communicator is freed only once nothing more can arrive on it. Open MPI gives a freed
  // communicator's context id to the next one created, and a late message (a goodbye or chunk
  // sent before the peer shut down) then lands in the new communicator with the old one's
  // sequence number, after which that peer's later messages on it are never matched (seen as a
  // goodbye that never came). A peer's goodbye is its last control message and counts its data
  // chunks, so both communicators are quiet once every peer's goodbye is in and every chunk it
  // counted was received; otherwise they are kept, at the cost of one context id each.
  const Deadline until = Clock::now() + kDrain;
  while (!goodbyes_in() && Clock::now() < until) {
    progress_control();
    std::this_thread::yield();
  }
  const bool quiet = goodbyes_in();
  if (control_recv_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&control_recv_);
    std::vector<MPI_Request> last{control_recv_};
    drain(last, kDrain);
  }
  if (quiet) MPI_Comm_free(&control_);
  bool chunks_in = true;
  for (int p = 0; p < size_; ++p) {
    const Peer& peer = peers_[static_cast<std::size_t>(p)];
    if (p != rank_ && peer.chunks_received != peer.goodbye_chunks) chunks_in = false;
  }
  if (quiet && chunks_in && aborted_.ok() && draining_.empty()) MPI_Comm_free(&data_);
}

bool MpiTransport::goodbyes_in() const {
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && !peers_[static_cast<std::size_t>(p)].said_goodbye) return false;
  return true;
}

void MpiTransport::drain(std::vector<MPI_Request>& requests, std::chrono::milliseconds bound) {
  const Deadline until = Clock::now() + bound;
  while (!requests.empty()) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done || Clock::now() >= until) break;
    std::this_thread::yield();
  }
  for (MPI_Request& r : requests)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  requests.clear();
}

Status MpiTransport::check_args(int peer, const void* data, std::size_t bytes,
                                const char* what) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    return invalid_argument(fmt::format("mpi: {} to rank {}: no such peer (rank {} of {})", what,
                                        peer, rank_, size_));
  if (data == nullptr && bytes > 0)
    return invalid_argument(fmt::format("mpi: {} of {} bytes with a null buffer", what, bytes));
  return Status::success();
}

Result<RequestId> MpiTransport::send(int peer, const void* data, std::size_t bytes) {
  HOOP_RETURN_IF_ERROR(check_args(peer, data, bytes, "send"));
  std::lock_guard<std::mutex> lock(mpi_mutex());
  if (!aborted_.ok()) return aborted_;
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (!p.failed.ok()) return p.failed;
  Request r;
  r.is_send = true;
  r.peer = peer;
  r.bytes = bytes;
  r.data = static_cast<char*>(const_cast<void*>(data));
  std::size_t offset = 0;
  do {
    const std::size_t n = std::min(options_.chunk_bytes, bytes - offset);
    const int tag = offset + n == bytes ? kLast : kMore;
    MPI_Request part = MPI_REQUEST_NULL;
    const int rc = MPI_Isend(r.data + offset, static_cast<int>(n), MPI_BYTE, peer, tag, data_,
                             &part);
    if (rc != MPI_SUCCESS) {
      const Status s = peer_lost(fmt::format("mpi: send to rank {}: {}", peer, error_text(rc)));
      for (MPI_Request& q : r.parts) draining_.push_back(q);
      fail_peer(peer, s);
      return s;
    }
    r.parts.push_back(part);
    ++p.chunks_sent;
    offset += n;
  } while (offset < bytes);
  auto [id, slot] = requests_.add();
  slot = std::move(r);
  return id;
}

Result<RequestId> MpiTransport::recv(int peer, void* data, std::size_t bytes) {
  HOOP_RETURN_IF_ERROR(check_args(peer, data, bytes, "receive"));
  std::lock_guard<std::mutex> lock(mpi_mutex());
  if (!aborted_.ok()) return aborted_;
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (!p.failed.ok()) return p.failed;
  Request r;
  r.peer = peer;
  r.bytes = bytes;
  r.data = static_cast<char*>(data);
  auto [id, slot] = requests_.add();
  slot = std::move(r);
  p.recvs.push_back(id);
  return id;
}

void MpiTransport::finish(Request& r, Status status) {
  for (MPI_Request& q : r.parts)
    if (q != MPI_REQUEST_NULL) draining_.push_back(q);
  r.parts.clear();
  if (r.scratch) draining_buffers_.push_back(std::move(r.scratch));
  r.done = true;
  r.status = std::move(status);
}

void MpiTransport::fail_peer(int peer, const Status& cause) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (p.failed.ok()) p.failed = cause;
  requests_.for_each([&](RequestId, Request& r) {
    if (!r.done && r.peer == peer) finish(r, p.failed);
  });
  p.recvs.clear();
}

void MpiTransport::abort_locked(const Status& cause, bool tell_peers) {
  if (!aborted_.ok()) return;
  aborted_ = cause;
  requests_.for_each([this](RequestId, Request& r) {
    if (!r.done) finish(r, aborted_);
  });
  for (Peer& p : peers_) p.recvs.clear();
  if (tell_peers)
    for (int p = 0; p < size_; ++p)
      if (p != rank_) send_control(p, ControlKind::kAbort, aborted_, 0);
}

void MpiTransport::send_control(int peer, ControlKind kind, const Status& cause,
                                std::uint64_t chunks) {
  ControlFrame& f = control_out_.emplace_back();
  f.serial = serial_;
  f.kind = kind;
  f.code = static_cast<std::uint8_t>(cause.code());
  f.chunks = chunks;
  const std::size_t n = std::min(cause.message().size(), kMaxCause);
  std::memcpy(f.text, cause.message().data(), n);
  f.length = static_cast<std::uint16_t>(n);
  MPI_Request request = MPI_REQUEST_NULL;
  // A peer that cannot be told is already gone; its own failure reaches it otherwise.
  if (MPI_Isend(&f, kFrameHeader + static_cast<int>(n), MPI_BYTE, peer, kControl, control_,
                &request) == MPI_SUCCESS)
    control_sends_.push_back(request);
}

void MpiTransport::post_control_recv() {
  if (MPI_Irecv(&control_in_, sizeof control_in_, MPI_BYTE, MPI_ANY_SOURCE, kControl, control_,
                &control_recv_) != MPI_SUCCESS)
    control_recv_ = MPI_REQUEST_NULL;
}

bool MpiTransport::progress_control() {
  bool moved = false;
  while (control_recv_ != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_Status st;
    if (MPI_Test(&control_recv_, &done, &st) != MPI_SUCCESS || !done) break;
    moved = true;
    const int from = st.MPI_SOURCE;
    const ControlFrame f = control_in_;
    post_control_recv();
    // A frame for an earlier transport whose communicator's id this one reuses is stale.
    if (f.serial != serial_ || from < 0 || from >= size_ || from == rank_) continue;
    if (f.kind == ControlKind::kAbort) {
      const std::string text(f.text, std::min<std::size_t>(f.length, kMaxCause));
      abort_locked(Status(static_cast<StatusCode>(f.code),
                          fmt::format("mpi: rank {} aborted: {}", from, text)),
                   false);
    } else if (f.kind == ControlKind::kGoodbye) {
      Peer& p = peers_[static_cast<std::size_t>(from)];
      p.said_goodbye = true;
      p.goodbye_chunks = f.chunks;
    }
  }
  // Sends of earlier control frames: forget the finished ones and their frames.
  if (!control_sends_.empty()) {
    int done = 0;
    MPI_Testall(static_cast<int>(control_sends_.size()), control_sends_.data(), &done,
                MPI_STATUSES_IGNORE);
    if (done) {
      control_sends_.clear();
      control_out_.clear();
    }
  }
  return moved;
}

bool MpiTransport::progress_sends() {
  bool moved = false;
  requests_.for_each([&](RequestId, Request& r) {
    if (!r.is_send || r.done) return;
    int done = 0;
    std::vector<MPI_Status> st(r.parts.size());
    const int rc = MPI_Testall(static_cast<int>(r.parts.size()), r.parts.data(), &done, st.data());
    if (rc == MPI_SUCCESS && !done) return;
    moved = true;
    if (rc == MPI_SUCCESS) {
      r.parts.clear();
      finish(r, Status::success());
      return;
    }
    int code = rc;
    for (const MPI_Status& s : st)
      if (rc == MPI_ERR_IN_STATUS && s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING)
        code = s.MPI_ERROR;
    fail_peer(r.peer, peer_lost(fmt::format("mpi: {}: {}", describe(r), error_text(code))));
  });
  return moved;
}

bool MpiTransport::progress_recvs(int peer) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  bool moved = false;
  while (!p.recvs.empty()) {
    Request& r = requests_.at(p.recvs.front());
    if (!r.parts.empty()) {
      int done = 0;
      MPI_Status st;
      const int rc = MPI_Test(&r.parts.front(), &done, &st);
      if (rc == MPI_SUCCESS && !done) break;
      if (rc != MPI_SUCCESS) {
        fail_peer(peer, peer_lost(fmt::format("mpi: {}: {}", describe(r), error_text(rc))));
        return true;
      }
      moved = true;
      r.parts.clear();
      ++p.chunks_received;
      if (!r.last_matched) continue;
      if (r.seen == r.bytes) {
        finish(r, Status::success());
      } else {
        finish(r, protocol_error(fmt::format(
                      "mpi: receive from rank {} expected {} bytes, but rank {} sent {} bytes",
                      peer, r.bytes, peer, r.seen)));
      }
      p.recvs.pop_front();
      continue;
    }
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status st;
    const int rc = MPI_Improbe(peer, MPI_ANY_TAG, data_, &found, &message, &st);
    if (rc != MPI_SUCCESS) {
      fail_peer(peer, peer_lost(fmt::format("mpi: {}: {}", describe(r), error_text(rc))));
      return true;
    }
    if (!found) {
      if (p.said_goodbye && p.chunks_received == p.goodbye_chunks) {
        fail_peer(peer, peer_lost(fmt::format("mpi: rank {} shut its transport down", peer)));
        return true;
      }
      break;
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    const auto n = static_cast<std::size_t>(count);
    char* into = nullptr;
    if (r.seen == r.offset && r.offset + n <= r.bytes) {
      into = r.data + r.offset;
      r.offset += n;
    } else {
      // The lengths differ: the surplus is read and dropped, so the stream goes on.
      if (!r.scratch || r.scratch->size() < n) r.scratch = std::make_shared<std::vector<char>>(n);
      into = r.scratch->data();
    }
    r.seen += n;
    r.last_matched = st.MPI_TAG == kLast;
    MPI_Request part = MPI_REQUEST_NULL;
    if (MPI_Imrecv(into, count, MPI_BYTE, &message, &part) != MPI_SUCCESS) {
      fail_peer(peer, peer_lost(fmt::format("mpi: {}: MPI_Imrecv failed", describe(r))));
      return true;
    }
    r.parts.push_back(part);
    moved = true;
  }
  return moved;
}

bool MpiTransport::progress() {
  bool moved = progress_control();
  if (!draining_.empty()) {
    int done = 0;
    MPI_Testall(static_cast<int>(draining_.size()), draining_.data(), &done, MPI_STATUSES_IGNORE);
    if (done) {
      draining_.clear();
      draining_buffers_.clear();
    }
  }
  moved |= progress_sends();
  for (int peer = 0; peer < size_; ++peer)
    if (!peers_[static_cast<std::size_t>(peer)].recvs.empty()) moved |= progress_recvs(peer);
  return moved;
}

std::string MpiTransport::describe(const Request& r) const {
  return fmt::format("{} {} bytes {} rank {}", r.is_send ? "send of" : "receive of", r.bytes,
                     r.is_send ? "to" : "from", r.peer);
}

Status MpiTransport::wait(std::span<const RequestId> ids, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mpi_mutex());
  HOOP_RETURN_IF_ERROR(check_requests_known(requests_, ids, "mpi"));
  auto spin_until = Clock::now() + options_.spin;
  auto nap = std::chrono::microseconds(50);
  while (true) {
    const bool moved = progress();
    if (std::all_of(ids.begin(), ids.end(), [&](RequestId id) { return requests_.at(id).done; }))
      break;
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string outstanding;
      std::size_t count = 0;
      for (RequestId id : ids) {
        const Request& r = requests_.at(id);
        if (r.done) continue;
        if (count++ < 8) outstanding += (outstanding.empty() ? "" : "; ") + describe(r);
      }
      const Status timeout = timeout_error(
          fmt::format("mpi: rank {}: {} request(s) did not complete before the deadline: {}{}",
                      rank_, count, outstanding, count > 8 ? "; ..." : ""));
      abort_locked(timeout, true);
      for (RequestId id : ids) requests_.erase(id);
      return timeout;
    }
    // Yield (or nap) without the lock, so that another of hoop's threads can drive MPI.
    lock.unlock();
    if (moved) {
      spin_until = now + options_.spin;
      nap = std::chrono::microseconds(50);
    }
    if (now < spin_until) {
      ::sched_yield();
    } else {
      std::this_thread::sleep_for(std::min<Clock::duration>(nap, deadline - now));
      nap = std::min(nap * 2, std::chrono::microseconds(1000));
    }
    lock.lock();
  }
  return consume_requests(requests_, ids);
}

Result<bool> MpiTransport::test(RequestId id) {
  std::lock_guard<std::mutex> lock(mpi_mutex());
  // MPI moves only when asked, so every test makes one pass, done or not.
  progress();
  return test_request(
      requests_, id, "mpi", [](const Request& r) { return r.done; }, [] {});
}

void MpiTransport::poll(std::chrono::microseconds timeout) {
  const Deadline until = Clock::now() + timeout;
  auto nap = std::chrono::microseconds(50);
  while (true) {
    bool moved = false;
    {
      std::lock_guard<std::mutex> lock(mpi_mutex());
      moved = progress();
    }
    if (moved || woken_.exchange(false)) return;
    const auto now = Clock::now();
    if (now >= until) return;
    std::this_thread::sleep_for(std::min<Clock::duration>(nap, until - now));
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace

Result<std::unique_ptr<Transport>> connect(int rank, int size, const MpiOptions& options) {
  if (options.chunk_bytes == 0 || options.chunk_bytes > static_cast<std::size_t>(INT_MAX))
    return invalid_argument(
        fmt::format("mpi: chunk of {} bytes: must be 1 to INT_MAX", options.chunk_bytes));
  HOOP_RETURN_IF_ERROR(ensure_world(rank, size));
  const Deadline deadline = Clock::now() + options.connect_timeout;
  HOOP_ASSIGN_OR_RETURN(MPI_Comm data, duplicate_world(deadline, "data"));
  HOOP_ASSIGN_OR_RETURN(MPI_Comm control, duplicate_world(deadline, "control"));
  std::lock_guard<std::mutex> lock(mpi_mutex());
  return std::unique_ptr<Transport>(new MpiTransport(rank, size, data, control, options));
}

}  // namespace hoop::mpi
