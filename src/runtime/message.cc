#include "runtime/message.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/bytes.h"

namespace hoop::runtime {
namespace {

// Bounds checked before anything is allocated for a decoded field.
constexpr std::size_t kMaxName = 4096;
constexpr std::uint32_t kMaxItems = 1u << 24;
constexpr std::uint32_t kMaxDims = 64;

void put_string(std::string& out, std::string_view s) {
  append_le<std::uint32_t>(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}

void put_double(std::string& out, double v) {
  append_le<std::uint64_t>(out, std::bit_cast<std::uint64_t>(v));
}

void put_request(std::string& out, const Request& r) {
  put_string(out, r.name);
  out.push_back(static_cast<char>(r.type));
  out.push_back(static_cast<char>(r.dtype));
  out.push_back(static_cast<char>(r.op));
  append_le<std::uint32_t>(out, static_cast<std::uint32_t>(r.shape.size()));
  for (std::int64_t d : r.shape) append_le<std::uint64_t>(out, static_cast<std::uint64_t>(d));
  append_le<std::uint32_t>(out, static_cast<std::uint32_t>(r.root));
  append_le<std::uint32_t>(out, static_cast<std::uint32_t>(r.device));
  put_double(out, r.prescale);
  put_double(out, r.postscale);
  put_string(out, r.group);
  append_le<std::uint32_t>(out, r.group_size);
}

/// Reads fields in order; the first failure sticks and names the field.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : r_(bytes) {}

  std::uint8_t u8(const char* what) {
    std::uint8_t v = 0;
    if (ok() && !r_.u8(v)) fail(what);
    return v;
  }
  std::uint32_t u32(const char* what) {
    std::uint32_t v = 0;
    if (ok() && !r_.u32(v)) fail(what);
    return v;
  }
  std::uint64_t u64(const char* what) {
    std::uint64_t v = 0;
    if (ok() && !r_.u64(v)) fail(what);
    return v;
  }
  double f64(const char* what) { return std::bit_cast<double>(u64(what)); }
  /// The next `n` bytes where they lie (empty once a read has failed: callers stop then).
  std::string_view raw(const char* what, std::size_t n) {
    std::string_view v;
    if (ok() && !r_.bytes(n, v)) fail(what);
    return ok() ? v : std::string_view();
  }
  std::string str(const char* what, std::size_t max = kMaxName) {
    std::string_view v;
    if (ok() && !r_.sized(max, v)) fail(what);
    return std::string(v);
  }
  std::uint32_t items(const char* what, std::uint32_t max = kMaxItems) {
    const std::uint32_t n = u32(what);
    // Every item takes at least one byte, so a count beyond what is left is corrupt.
    if (ok() && (n > max || n > r_.left())) fail(what);
    return ok() ? n : 0;
  }
  template <typename E>
  E enumerated(const char* what, E last) {
    const std::uint8_t v = u8(what);
    if (ok() && v > static_cast<std::uint8_t>(last)) fail(what);
    return static_cast<E>(v);
  }
  Request request() {
    Request q;
    q.name = str("tensor name");
    q.type = enumerated("operation", OpType::kBarrier);
    q.dtype = enumerated("dtype", DataType::kI16);
    q.op = enumerated("reduce op", ReduceOp::kAdasum);
    const std::uint32_t dims = items("shape", kMaxDims);
    for (std::uint32_t i = 0; i < dims && ok(); ++i)
      q.shape.push_back(static_cast<std::int64_t>(u64("shape")));
    q.root = static_cast<std::int32_t>(u32("root"));
    q.device = static_cast<std::int32_t>(u32("device"));
    q.prescale = f64("prescale");
    q.postscale = f64("postscale");
    q.group = str("group");
    q.group_size = u32("group size");
    return q;
  }
  bool ok() const { return error_.empty(); }
  Status finish(const char* message) const {
    if (!ok()) return protocol_error(fmt::format("runtime: malformed {} (at {})", message, error_));
    if (r_.left() != 0)
      return protocol_error(
          fmt::format("runtime: malformed {} ({} bytes after the end)", message, r_.left()));
    return Status::success();
  }

 private:
  void fail(const char* what) {
    if (ok()) error_ = what;
  }
  PayloadReader r_;
  std::string error_;
};

}  // namespace

std::string_view op_type_name(OpType type) {
  switch (type) {
    case OpType::kAllreduce:
      return "allreduce";
    case OpType::kAllgather:
      return "allgather";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kAlltoall:
      return "alltoall";
    case OpType::kReducescatter:
      return "reducescatter";
    case OpType::kBarrier:
      return "barrier";
  }
  return "unknown";
}

bool same_description(const Request& a, const Request& b, bool skip_first_dim) {
  const bool free_first =
      skip_first_dim && (a.type == OpType::kAllgather || a.type == OpType::kAlltoall);
  const bool shapes = free_first
                          ? a.shape.size() == b.shape.size() && !a.shape.empty() &&
                                std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1)
                          : a.shape == b.shape;
  return a.name == b.name && a.type == b.type && a.dtype == b.dtype && a.op == b.op && shapes &&
         a.root == b.root && a.device == b.device && a.prescale == b.prescale &&
         a.postscale == b.postscale && a.group == b.group && a.group_size == b.group_size;
}

void encode(const RequestList& list, std::string& out) {
  out.clear();
  append_le<std::uint32_t>(out, static_cast<std::uint32_t>(list.requests.size()));
  for (const Request& r : list.requests) put_request(out, r);
  // Cached slots as a bit vector (bit s set: slot s is ready here), the form the coordinator
  // intersects across ranks; a list of slot numbers when that is shorter (a few sparse slots).
  std::uint32_t top = 0;
  for (std::uint32_t s : list.cached) top = std::max(top, s + 1);
  const std::size_t bitmap_bytes = (top + 7) / 8;
  if (bitmap_bytes < list.cached.size() * 4) {
    out.push_back(1);
    append_le<std::uint32_t>(out, top);
    const std::size_t bits = out.size();
    out.append(bitmap_bytes, '\0');
    for (std::uint32_t s : list.cached)
      out[bits + s / 8] = static_cast<char>(out[bits + s / 8] | (1 << (s % 8)));
  } else {
    out.push_back(0);
    append_le<std::uint32_t>(out, static_cast<std::uint32_t>(list.cached.size()));
    for (std::uint32_t s : list.cached) append_le<std::uint32_t>(out, s);
  }
  out.push_back(static_cast<char>((list.join ? 1 : 0) | (list.shutdown ? 2 : 0) |
                                  (list.tuning ? 4 : 0) | (list.carries ? 8 : 0)));
  if (list.tuning) {
    append_le<std::uint64_t>(out, list.tuning->fusion_threshold);
    out.push_back(static_cast<char>(list.tuning->algorithm));
    append_le<std::uint64_t>(out, static_cast<std::uint64_t>(list.tuning->cycle_us));
    append_le<std::uint64_t>(out, static_cast<std::uint64_t>(list.tuning->cache_capacity));
  }
  if (list.carries) {
    append_le<std::uint32_t>(out, static_cast<std::uint32_t>(list.carried.size()));
    out.append(list.carried);
  }
}

std::string encode(const RequestList& list) {
  std::string out;
  encode(list, out);
  return out;
}

void Response::clear() {
  type = OpType::kAllreduce;
  tensors.clear();
  slots.clear();
  first_dims.clear();
  joined.clear();
  error.clear();
  algorithm = Algorithm::kAuto;
  carried = false;
  inputs.clear();
}

Response& Responses::add() {
  if (used_ == all_.size()) all_.emplace_back();
  return all_[used_++];
}

void Responses::clear() {
  for (Response& r : *this) r.clear();
  used_ = 0;
}

void ResponseList::clear() {
  responses.clear();
  join_done_last = -1;
  shutdown = false;
  shutdown_by = -1;
}

Status decode_request_list(std::string_view bytes, RequestList& list) {
  Reader in(bytes);
  list.clear();
  const std::uint32_t n = in.items("request count");
  for (std::uint32_t i = 0; i < n && in.ok(); ++i) list.requests.push_back(in.request());
  if (in.u8("cached form") == 1) {
    const std::uint32_t top = in.u32("cached bits");
    const std::string_view bits = in.raw("cached bits", (static_cast<std::size_t>(top) + 7) / 8);
    for (std::uint32_t s = 0; s < top && in.ok(); ++s)
      if ((static_cast<unsigned char>(bits[s / 8]) >> (s % 8)) & 1u) list.cached.push_back(s);
  } else {
    const std::uint32_t c = in.items("cached count");
    for (std::uint32_t i = 0; i < c && in.ok(); ++i) list.cached.push_back(in.u32("cache slot"));
  }
  const std::uint8_t flags = in.u8("flags");
  list.join = (flags & 1) != 0;
  list.shutdown = (flags & 2) != 0;
  if ((flags & 4) != 0) {
    Tuning t;
    t.fusion_threshold = in.u64("fusion threshold");
    t.algorithm = in.enumerated("algorithm", Algorithm::kHierarchical);
    t.cycle_us = static_cast<std::int64_t>(in.u64("cycle time"));
    t.cache_capacity = static_cast<std::int64_t>(in.u64("cache capacity"));
    list.tuning = t;
  }
  if ((flags & 8) != 0) {
    list.carries = true;
    list.carried = in.raw("carried data", in.u32("carried length"));
  }
  if ((flags & ~15) != 0) return protocol_error("runtime: malformed request list (flags)");
  return in.finish("request list");
}

Result<RequestList> decode_request_list(std::string_view bytes) {
  RequestList list;
  HOOP_RETURN_IF_ERROR(decode_request_list(bytes, list));
  return list;
}

}  // namespace hoop::runtime
