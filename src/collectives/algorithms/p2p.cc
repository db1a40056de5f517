// Point-to-point send and recv: a 16-byte header (tag, dtype, count) ahead of the data, so a
// receive that meets a different send fails naming both sides instead of reading wrong bytes.
// The header and the data travel as two messages, posted together (the transport keeps them
// in order), and a receive posts both of its receives at once too.
#include <fmt/format.h>

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

Status check_p2p(const Communicator& comm, DataType dtype, std::size_t count, const void* data,
                 int peer, std::string_view buffer) {
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

/// One side of an exchange in flight: its requests, and for a receive the header to compare.
struct Posted {
  std::vector<RequestId> ids;
  Header got;
};

Status post_send(Context& ctx, const SendOptions& o, Header& header, Posted& p) {
  header = Header{o.tag, static_cast<std::uint32_t>(o.dtype), o.count};
  HOOP_ASSIGN_OR_RETURN(RequestId h, ctx.send(o.peer, &header, sizeof(header)));
  p.ids.push_back(h);
  HOOP_ASSIGN_OR_RETURN(RequestId d, ctx.send(o.peer, o.data, o.count * dtype_size(o.dtype)));
  p.ids.push_back(d);
  return Status::success();
}

Status post_recv(Context& ctx, const RecvOptions& o, Posted& p) {
  HOOP_ASSIGN_OR_RETURN(RequestId h, ctx.recv(o.peer, &p.got, sizeof(p.got)));
  p.ids.push_back(h);
  HOOP_ASSIGN_OR_RETURN(RequestId d, ctx.recv(o.peer, o.data, o.count * dtype_size(o.dtype)));
  p.ids.push_back(d);
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
    Header header;
    Posted p;
    HOOP_RETURN_IF_ERROR(post_send(ctx, o, header, p));
    return ctx.wait(p.ids);
  });
}

Status recv(Communicator& comm, const RecvOptions& o) {
  HOOP_RETURN_IF_ERROR(check_p2p(comm, o.dtype, o.count, o.data, o.peer, "data"));
  auto what = [&] { return describe("recv", o.count, o.dtype, "from", o.peer, o.tag); };
  const Staged staged{nullptr, 0, o.data, o.count * dtype_size(o.dtype)};
  return run_p2p_call(comm, o, &recv, staged, what, [&](Context& ctx) -> Status {
    Posted p;
    HOOP_RETURN_IF_ERROR(post_recv(ctx, o, p));
    Status s = ctx.wait(p.ids);
    // A different count shows as the transport's length check on the data, after the header:
    // the header names every field that differs.
    if (!s.ok() && s.code() != StatusCode::kProtocolError) return s;
    HOOP_RETURN_IF_ERROR(compare(o, p.got, ctx.rank));
    return s;
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
    Header header;
    Posted sent, got;
    HOOP_RETURN_IF_ERROR(post_recv(ctx, from, got));
    HOOP_RETURN_IF_ERROR(post_send(ctx, to, header, sent));
    std::vector<RequestId> all = got.ids;
    all.insert(all.end(), sent.ids.begin(), sent.ids.end());
    Status s = ctx.wait(all);
    if (!s.ok() && s.code() != StatusCode::kProtocolError) return s;
    HOOP_RETURN_IF_ERROR(compare(from, got.got, ctx.rank));
    return s;
  });
}

}  // namespace hoop
