// Point-to-point send and recv: a 16-byte header (tag, dtype, count) ahead of the data, so a
// receive that meets a different send fails naming both sides instead of reading wrong bytes.
// Up to kInlineBytes of data travel in one frame with the header (one message instead of two:
// half the transport's work for the small messages that dominate p2p latency); larger data
// travel as a second message posted with the header (the transport keeps them in order), and
// a receive posts both of its receives at once too. A frame has one of four sizes, by the data's
// size class (kFrameClasses), so that two ranks whose counts differ within a class still meet
// and the header names the difference; a send and a receive of different classes fail on their
// sizes. Several classes rather than one: the receiver reads what the sender just wrote from the
// other core's cache, and a 64-byte frame moves 8 bytes in 0.67x the time a 272-byte one took.
// Frames up to 2 KiB of data: past the frames, header and data are two messages, and over
// shared memory a 1-2 KiB sendrecv took 1.1-1.3x the time it takes in a frame; a 1 KiB or 2 KiB
// frame copies at most 4x its data. The frames past 256 bytes live in the communicator's scratch,
// not on the stack: 4 KiB more stack in sendrecv made its 8-128 B exchanges up to 1.8x slower.
// (The collectives' call check inlines small payloads too, at their own length: it compares
// whole fingerprints, where a receive here must read the sender's header to name its fields.)
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/algorithms/dispatch.h"
#include "collectives/algorithms/validate.h"
#include "device/device.h"

namespace hoop {
namespace {

using collectives::bytes_of;
using collectives::Context;
using collectives::Staged;

struct Header {
  std::int32_t tag = 0;
  std::uint32_t dtype = 0;
  std::uint64_t count = 0;
};
static_assert(sizeof(Header) == 16);

/// check_p2p's failure, named (the checks one by one).
[[gnu::noinline]] Status p2p_failure(const Communicator& comm, DataType dtype, std::size_t count,
                                     const void* data, int peer, std::string_view buffer) {
  HOOP_RETURN_IF_ERROR(collectives::check_dtype(dtype));
  if (peer < 0 || peer >= comm.size())
    return invalid_argument(
        fmt::format("peer {} is not a rank of this communicator of {} ranks", peer, comm.size()));
  if (peer == comm.rank())
    return invalid_argument(
        fmt::format("peer {} is this rank: a rank cannot send to itself", peer));
  HOOP_RETURN_IF_ERROR(collectives::checked_bytes(count, 1, dtype, "count").status());
  return collectives::check_buffer(data, count, buffer);
}

/// The arguments of one side of a point-to-point call, checked: the usual case in a few
/// compares, since a small message's whole exchange costs little more than a few dozen Status
/// checks.
Status check_p2p(const Communicator& comm, DataType dtype, std::size_t count, const void* data,
                 int peer, std::string_view buffer) {
  if (static_cast<unsigned>(dtype) < std::size(kAllDataTypes) && peer >= 0 && peer < comm.size() &&
      peer != comm.rank() && (data != nullptr || count == 0) && count <= (std::size_t{1} << 56))
    return Status::success();
  return p2p_failure(comm, dtype, count, data, peer, buffer);
}

/// The payload capacities of the frames: data of at most kFrameClasses[i] bytes (and more than
/// the class before) travel in a frame of the header and that many bytes.
constexpr std::size_t kFrameClasses[] = {48, 256, 1024, 2048};
/// The largest payload that travels inside the header's frame.
constexpr std::size_t kInlineBytes = kFrameClasses[std::size(kFrameClasses) - 1];
/// The largest payload of a frame on the stack (Posted::frame); larger frames are scratch.
constexpr std::size_t kStackPayload = 256;
/// What a receive's header holds until a header arrives.
constexpr std::uint32_t kNoHeader = 0xffffffffu;

struct Frame {
  Header header;
  std::byte payload[kStackPayload];
};
static_assert(offsetof(Frame, payload) == sizeof(Header));

/// One side of an exchange in flight: its requests, the header (and for small data the payload)
/// it sends or receives, and the payload capacity of its frame (0: header and data apart).
struct Posted {
  std::array<RequestId, 2> ids{};
  std::size_t n = 0;
  Frame frame;
  std::size_t framed = 0;
  /// The frame that travels: `frame`, or scratch past kStackPayload (the header first, then
  /// the payload, as in Frame).
  std::byte* at = nullptr;
  std::span<const RequestId> requests() const { return {ids.data(), n}; }
  /// Points `at` at a frame for `framed` bytes of payload: `frame`, or scratch slot `slot`.
  void place(Context& ctx, int slot) {
    at = framed <= kStackPayload ? reinterpret_cast<std::byte*>(&frame)
                                 : ctx.scratch.get(slot, sizeof(Header) + framed);
  }
  std::byte* payload() const { return at + sizeof(Header); }
  /// Whether the frame is in scratch, where the header must be copied in or out.
  bool in_scratch() const { return at != reinterpret_cast<const std::byte*>(&frame); }
};

/// The scratch slots of the frames past kStackPayload: a sendrecv's two sides use both.
constexpr int kSendSlot = 0;
constexpr int kRecvSlot = 1;

/// The payload capacity of the frame that `bytes` of data travel in, 0 past kInlineBytes:
/// decided by the size alone, which both sides know, whatever memory either side's buffer is
/// in (device data is copied).
std::size_t framed(std::size_t bytes) {
  for (std::size_t c : kFrameClasses)
    if (bytes <= c) return c;
  return 0;
}

/// The sizes of data that travel otherwise than `bytes` do, for a message naming a send of
/// another size class: "more than 48", "at most 48 or more than 256", "at most 2048".
std::string other_classes(std::size_t bytes) {
  const std::size_t cap = framed(bytes);
  std::size_t below = 0;  // the largest size of the class before
  for (std::size_t c : kFrameClasses)
    if (c < bytes) below = c;
  if (cap == 0) return fmt::format("at most {}", kInlineBytes);
  if (below == 0) return fmt::format("more than {}", cap);
  return fmt::format("at most {} or more than {}", below, cap);
}

/// With `lend`, the data goes as one side of an exchange (sendrecv: Transport::send_lent).
Status post_send(Context& ctx, const SendOptions& o, Posted& p, bool lend) {
  const std::size_t bytes = o.count * dtype_size(o.dtype);
  p.frame.header = Header{o.tag, static_cast<std::uint32_t>(o.dtype), o.count};
  p.framed = framed(bytes);
  if (p.framed != 0) {
    p.place(ctx, kSendSlot);
    if (p.in_scratch()) std::memcpy(p.at, &p.frame.header, sizeof(Header));
    HOOP_RETURN_IF_ERROR(ctx.copy(p.payload(), o.data, bytes));
    HOOP_ASSIGN_OR_RETURN(p.ids[p.n++], ctx.send(o.peer, p.at, sizeof(Header) + p.framed));
    return Status::success();
  }
  HOOP_ASSIGN_OR_RETURN(p.ids[p.n++], ctx.send_more(o.peer, &p.frame.header, sizeof(Header)));
  HOOP_ASSIGN_OR_RETURN(p.ids[p.n++], lend ? ctx.send_lent(o.peer, o.data, bytes)
                                            : ctx.send(o.peer, o.data, bytes));
  return Status::success();
}

Status post_recv(Context& ctx, const RecvOptions& o, Posted& p) {
  const std::size_t bytes = o.count * dtype_size(o.dtype);
  p.frame.header.dtype = kNoHeader;
  p.framed = framed(bytes);
  if (p.framed != 0) {
    p.place(ctx, kRecvSlot);
    HOOP_ASSIGN_OR_RETURN(p.ids[p.n++], ctx.recv(o.peer, p.at, sizeof(Header) + p.framed));
    return Status::success();
  }
  HOOP_ASSIGN_OR_RETURN(p.ids[p.n++], ctx.recv(o.peer, &p.frame.header, sizeof(Header)));
  HOOP_ASSIGN_OR_RETURN(p.ids[p.n++], ctx.recv(o.peer, o.data, bytes));
  return Status::success();
}

/// The received header against what this rank expected: mismatch_error naming the fields.
Status compare(const RecvOptions& o, const Header& got, int me) {
  std::string diff;
  if (got.tag != o.tag) diff += fmt::format(", tag {} against {}", got.tag, o.tag);
  if (got.dtype != static_cast<std::uint32_t>(o.dtype)) {
    const std::string theirs = got.dtype < std::size(kAllDataTypes)
                                   ? std::string(dtype_name(static_cast<DataType>(got.dtype)))
                                   : fmt::format("dtype {}", got.dtype);
    diff += fmt::format(", dtype {} against {}", theirs, dtype_name(o.dtype));
  }
  if (got.count != o.count) diff += fmt::format(", count {} against {}", got.count, o.count);
  if (diff.empty()) return Status::success();
  return mismatch_error(
      fmt::format("rank {} sent what rank {} did not expect: {} (sent against "
                  "expected)",
                  o.peer, me, diff.substr(2)));
}

std::string describe(const char* what, std::size_t count, DataType dtype, const char* dir, int peer,
                     std::int32_t tag) {
  return fmt::format("{} of {} {} {} rank {} (tag {})", what, count, dtype_name(dtype), dir, peer,
                     tag);
}

/// A receive's outcome once its requests finished with `s`: the header against what this rank
/// expected, and a frame's payload into place.
Status finish_recv(Context& ctx, const RecvOptions& o, Posted& p, const Status& s) {
  const int me = ctx.rank;
  // A different count shows as the transport's length check on the data, after the header:
  // the header names every field that differs. Where the header itself did not meet (one
  // side sent a frame, the other expected header and data), the sizes say which.
  if (!s.ok() && s.code() != StatusCode::kProtocolError) return s;
  const std::size_t bytes = o.count * dtype_size(o.dtype);
  if (!s.ok() && (p.framed != 0 || p.frame.header.dtype == kNoHeader)) {
    return mismatch_error(fmt::format(
        "rank {} sent what rank {} did not expect: {} bytes against {} bytes ({} {}, tag {})",
        o.peer, me, other_classes(bytes), bytes, o.count, dtype_name(o.dtype), o.tag));
  }
  // A frame in scratch brought its header there.
  if (p.framed != 0 && p.in_scratch()) std::memcpy(&p.frame.header, p.at, sizeof(Header));
  HOOP_RETURN_IF_ERROR(compare(o, p.frame.header, me));
  if (!s.ok()) return s;
  return p.framed != 0 ? ctx.copy(o.data, p.payload(), bytes) : Status::success();
}

/// Runs `body` for the buffer at `data` (device buffers through host copies: the header is host
/// memory, and one message must not mix the two).
template <typename Options>
Status run_p2p_call(Communicator& comm, const Options& o,
                    Status (*self)(Communicator&, const Options&), const Staged& staged,
                    const std::function<std::string()>& what,
                    const std::function<Status(Context&)>& body) {
  collectives::DevicePart* part = nullptr;
  if (auto done = collectives::run_on_device(comm, o, {std::nullopt, o.dtype, ReduceOp::kSum, true},
                                             nullptr, what, self, nullptr, staged, part))
    return *done;
  return collectives::run_p2p(comm, what, body, part);
}

}  // namespace

Status send(Communicator& comm, const SendOptions& o) {
  HOOP_RETURN_IF_ERROR(check_p2p(comm, o.dtype, o.count, o.data, o.peer, "data"));
  auto what = [&] { return describe("send", o.count, o.dtype, "to", o.peer, o.tag); };
  const Staged staged{o.data, o.count * dtype_size(o.dtype), nullptr, 0};
  return run_p2p_call(comm, o, &send, staged, what, [&](Context& ctx) -> Status {
    Posted p;
    HOOP_RETURN_IF_ERROR(post_send(ctx, o, p, /*lend=*/false));
    return ctx.wait(p.requests());
  });
}

Status recv(Communicator& comm, const RecvOptions& o) {
  HOOP_RETURN_IF_ERROR(check_p2p(comm, o.dtype, o.count, o.data, o.peer, "data"));
  auto what = [&] { return describe("recv", o.count, o.dtype, "from", o.peer, o.tag); };
  const Staged staged{nullptr, 0, o.data, o.count * dtype_size(o.dtype)};
  return run_p2p_call(comm, o, &recv, staged, what, [&](Context& ctx) -> Status {
    Posted p;
    HOOP_RETURN_IF_ERROR(post_recv(ctx, o, p));
    return finish_recv(ctx, o, p, ctx.wait(p.requests()));
  });
}

Status sendrecv(Communicator& comm, const SendOptions& to, const RecvOptions& from) {
  HOOP_RETURN_IF_ERROR(check_p2p(comm, to.dtype, to.count, to.data, to.peer, "send data"));
  HOOP_RETURN_IF_ERROR(check_p2p(comm, from.dtype, from.count, from.data, from.peer, "recv data"));
  auto what = [&] {
    return describe("sendrecv", to.count, to.dtype, "to", to.peer, to.tag) + " and " +
           describe("", from.count, from.dtype, "from", from.peer, from.tag).substr(1);
  };
  // Device buffers go through host copies: both halves live in one kind of memory
  // (buffers_device checks), and the header is host memory.
  Result<int> device =
      collectives::buffers_device({{to.data, "send data"}, {from.data, "recv data"}});
  if (!device.ok()) return device.status();
  if (*device != kCpuDevice) {
    std::vector<std::byte> out(to.count * dtype_size(to.dtype));
    std::vector<std::byte> in(from.count * dtype_size(from.dtype));
    HOOP_RETURN_IF_ERROR(device::copy(out.data(), to.data, out.size()));
    SendOptions host_to = to;
    RecvOptions host_from = from;
    host_to.data = out.data();
    host_from.data = in.data();
    HOOP_RETURN_IF_ERROR(sendrecv(comm, host_to, host_from));
    return device::copy(from.data, in.data(), in.size());
  }
  return collectives::run_p2p(comm, what, [&](Context& ctx) -> Status {
    Posted sent, got;
    HOOP_RETURN_IF_ERROR(post_recv(ctx, from, got));
    // sendrecv's peer posts its receive without waiting on this send (as MPI_Sendrecv's may).
    HOOP_RETURN_IF_ERROR(post_send(ctx, to, sent, /*lend=*/true));
    std::array<RequestId, 4> posted{};
    std::size_t n = 0;
    for (RequestId id : got.requests()) posted[n++] = id;
    for (RequestId id : sent.requests()) posted[n++] = id;
    return finish_recv(ctx, from, got, ctx.wait(std::span<const RequestId>(posted.data(), n)));
  });
}

}  // namespace hoop
