#include "collectives/algorithms/call_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

namespace hoop::collectives {
namespace {

// The header in front of a call's first message to a peer (little-endian hosts only, like the
// rest of the data path):
//   u32 magic | u32 call number | u8 kind | u8 dtype | u8 op | u8 algorithm | i32 root
//   | u32 counts hash | u32 present-bits (and the device flag) | u64 count
constexpr std::size_t kHeaderBytes = kFingerprintBytes;
constexpr std::uint32_t kMagic = 0x4C414348;  // "HCAL"
constexpr std::uint8_t kUnset = 0xFF;
constexpr std::uint32_t kRoot = 1;
constexpr std::uint32_t kCount = 2;
constexpr std::uint32_t kCountsHash = 4;
constexpr std::uint32_t kDevice = 8;

struct Decoded {
  std::uint32_t magic = 0;
  std::uint32_t seq = 0;
  CallFingerprint fp;
};

template <typename T>
void put(std::byte* at, T v) {
  std::memcpy(at, &v, sizeof(v));
}
template <typename T>
T get(const std::byte* at) {
  T v;
  std::memcpy(&v, at, sizeof(v));
  return v;
}

void encode(const CallFingerprint& fp, std::uint32_t seq, std::byte* out) {
  std::uint32_t present = 0;
  put(out, kMagic);
  put(out + 4, seq);
  put(out + 8, static_cast<std::uint8_t>(fp.kind));
  put(out + 9, fp.dtype ? static_cast<std::uint8_t>(*fp.dtype) : kUnset);
  put(out + 10, fp.op ? static_cast<std::uint8_t>(*fp.op) : kUnset);
  put(out + 11, fp.algorithm ? static_cast<std::uint8_t>(*fp.algorithm) : kUnset);
  put(out + 12, fp.root.value_or(0));
  put(out + 16, fp.counts_hash.value_or(0));
  if (fp.root) present |= kRoot;
  if (fp.count) present |= kCount;
  if (fp.counts_hash) present |= kCountsHash;
  if (fp.device) present |= kDevice;
  put(out + 20, present);
  put(out + 24, fp.count.value_or(0));
}

Decoded decode(const std::byte* in) {
  Decoded d;
  d.magic = get<std::uint32_t>(in);
  d.seq = get<std::uint32_t>(in + 4);
  d.fp.kind = static_cast<Collective>(get<std::uint8_t>(in + 8));
  const auto dtype = get<std::uint8_t>(in + 9);
  const auto op = get<std::uint8_t>(in + 10);
  const auto algo = get<std::uint8_t>(in + 11);
  if (dtype != kUnset) d.fp.dtype = static_cast<DataType>(dtype);
  if (op != kUnset) d.fp.op = static_cast<ReduceOp>(op);
  if (algo != kUnset) d.fp.algorithm = static_cast<Algorithm>(algo);
  const auto present = get<std::uint32_t>(in + 20);
  if (present & kRoot) d.fp.root = get<std::int32_t>(in + 12);
  if (present & kCountsHash) d.fp.counts_hash = get<std::uint32_t>(in + 16);
  if (present & kCount) d.fp.count = get<std::uint64_t>(in + 24);
  d.fp.device = (present & kDevice) != 0;
  return d;
}

std::string dtype_text(std::optional<DataType> d) {
  if (!d) return "-";
  if (static_cast<int>(*d) < static_cast<int>(std::size(kAllDataTypes)))
    return std::string(dtype_name(*d));
  return fmt::format("dtype {}", static_cast<int>(*d));
}
std::string op_text(std::optional<ReduceOp> o) {
  if (!o) return "-";
  if (*o <= ReduceOp::kAdasum) return std::string(op_name(*o));
  return fmt::format("op {}", static_cast<int>(*o));
}
std::string algorithm_text(std::optional<Algorithm> a) {
  if (!a) return "-";
  if (*a <= Algorithm::kHierarchical) return std::string(algorithm_name(*a));
  return fmt::format("algorithm {}", static_cast<int>(*a));
}
template <typename T>
std::string opt_text(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : std::string("-");
}

/// "allreduce (call 3) of 4 f32, sum, ring"
std::string describe(const CallFingerprint& fp, std::uint32_t seq) {
  std::string s = fmt::format("{} (call {})", collective_name(fp.kind), seq);
  if (fp.count && fp.dtype) s += fmt::format(" of {} {}", *fp.count, dtype_text(fp.dtype));
  if (fp.op) s += ", " + op_text(fp.op);
  if (fp.algorithm) s += ", " + algorithm_text(fp.algorithm);
  if (fp.root) s += fmt::format(", root {}", *fp.root);
  if (fp.device) s += ", on the device";
  return s;
}

}  // namespace

struct CallCheck::Action {
  RequestId id = 0;
  RequestId extra = 0;  // the separate header message (0: none or already completed)
  bool is_recv = false;
  int peer = -1;
  void* out = nullptr;  // an inline receive's destination
  std::size_t bytes = 0;
  bool inline_payload = false;
};

CallCheck::CallCheck() = default;
CallCheck::~CallCheck() = default;

std::uint32_t hash_counts(std::span<const std::size_t> counts) {
  // FNV-1a over the counts' bytes: the same on every rank, and one differing count changes it.
  std::uint32_t h = 2166136261u;
  for (std::size_t c : counts) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<std::uint8_t>(static_cast<std::uint64_t>(c) >> (8 * i));
      h *= 16777619u;
    }
  }
  return h;
}

CheckedTransport::CheckedTransport(Transport& base, CallCheck& state,
                                   const CallFingerprint& fingerprint)
    : base_(base), state_(state), seq_(++state.seq_) {
  const auto n = static_cast<std::size_t>(base.size());
  if (state_.sent_in_.size() < n) {
    state_.sent_in_.resize(n, 0);
    state_.recvd_in_.resize(n, 0);
    state_.staging_.resize(2 * n);
  }
  // A call that failed leaves its requests behind in the aborted transport; they are not ours.
  state_.actions_.clear();
  encode(fingerprint, static_cast<std::uint32_t>(seq_), header_);
}

std::byte* CheckedTransport::slot(int peer, int which) {
  auto& s = state_.staging_[2 * static_cast<std::size_t>(peer) + which];
  if (s == nullptr) s = std::make_unique<std::byte[]>(kHeaderBytes + CallCheck::kInlineBytes);
  return s.get();
}

Result<RequestId> CheckedTransport::post_send(int peer, const void* data, std::size_t bytes,
                                              Post how) {
  if (peer < 0 || peer >= size() || peer == rank() || state_.sent_in_[peer] == seq_)
    return (base_.*how)(peer, data, bytes);
  state_.sent_in_[peer] = seq_;
  std::byte* s = slot(peer, 0);
  std::memcpy(s, header_, kHeaderBytes);
  if (bytes <= CallCheck::kInlineBytes) {
    if (bytes > 0) std::memcpy(s + kHeaderBytes, data, bytes);
    return base_.send(peer, s, kHeaderBytes + bytes);
  }
  HOOP_ASSIGN_OR_RETURN(RequestId header, base_.send_more(peer, s, kHeaderBytes));
  HOOP_ASSIGN_OR_RETURN(RequestId id, (base_.*how)(peer, data, bytes));
  state_.actions_.push_back({id, header, false, peer, nullptr, 0, false});
  return id;
}

Result<RequestId> CheckedTransport::recv(int peer, void* data, std::size_t bytes) {
  if (peer < 0 || peer >= size() || peer == rank() || state_.recvd_in_[peer] == seq_)
    return base_.recv(peer, data, bytes);
  state_.recvd_in_[peer] = seq_;
  std::byte* s = slot(peer, 1);
  if (bytes <= CallCheck::kInlineBytes) {
    HOOP_ASSIGN_OR_RETURN(RequestId id, base_.recv(peer, s, kHeaderBytes + bytes));
    state_.actions_.push_back({id, 0, true, peer, data, bytes, true});
    return id;
  }
  HOOP_ASSIGN_OR_RETURN(RequestId header, base_.recv(peer, s, kHeaderBytes));
  HOOP_ASSIGN_OR_RETURN(RequestId id, base_.recv(peer, data, bytes));
  state_.actions_.push_back({id, header, true, peer, nullptr, 0, false});
  return id;
}

Status CheckedTransport::wait(std::span<const RequestId> ids, Deadline deadline) {
  auto& actions = state_.actions_;
  if (actions.empty()) return base_.wait(ids, deadline);
  // The separate header messages complete with their payloads; the list is copied only when
  // there are some (small messages carry theirs inline).
  std::vector<RequestId>& all = state_.ids_;
  all.clear();
  bool first_message = false;
  for (const CallCheck::Action& a : actions) {
    if (std::find(ids.begin(), ids.end(), a.id) == ids.end()) continue;
    first_message = true;
    if (a.extra != 0) all.push_back(a.extra);
  }
  if (!all.empty()) all.insert(all.end(), ids.begin(), ids.end());
  Status waited = base_.wait(all.empty() ? ids : std::span<const RequestId>(all), deadline);
  if (!waited.ok()) return first_message ? explain(waited) : waited;
  if (!first_message) return waited;
  Status first;
  for (RequestId id : ids) {
    Status s = finish(id);
    if (first.ok()) first = s;
  }
  return first;
}

Result<bool> CheckedTransport::test(RequestId id) {
  auto& actions = state_.actions_;
  auto it = std::find_if(actions.begin(), actions.end(),
                         [id](const CallCheck::Action& a) { return a.id == id; });
  if (it == actions.end()) return base_.test(id);
  if (it->extra != 0) {
    Result<bool> header_done = base_.test(it->extra);
    if (!header_done.ok()) return explain(header_done.status());
    if (!*header_done) return false;
    it->extra = 0;
  }
  Result<bool> tested = base_.test(id);
  if (!tested.ok()) return explain(tested.status());
  const bool done = *tested;
  if (!done) return false;
  HOOP_RETURN_IF_ERROR(finish(id));
  return true;
}

Status CheckedTransport::explain(Status s) const {
  // A length mismatch on a first message is a disagreement the fingerprint could not show,
  // since the transport drops a message of the wrong length unread.
  // A peer's abort may carry its own explanation already.
  if (s.code() != StatusCode::kProtocolError ||
      s.message().find("-byte call header") != std::string::npos)
    return s;
  const std::string call = describe(decode(header_).fp, static_cast<std::uint32_t>(seq_));
  return Status(s.code(), fmt::format("{} (both lengths include the {}-byte call header in front "
                                      "of a call's first message; this rank called {}: the "
                                      "ranks' counts or collectives differ)",
                                      s.message(), kHeaderBytes, call));
}

Status CheckedTransport::finish(RequestId id) {
  auto& actions = state_.actions_;
  auto it = std::find_if(actions.begin(), actions.end(),
                         [id](const CallCheck::Action& a) { return a.id == id; });
  if (it == actions.end()) return Status::success();
  const CallCheck::Action a = *it;
  *it = actions.back();
  actions.pop_back();
  if (!a.is_recv) return Status::success();
  const std::byte* s = slot(a.peer, 1);
  HOOP_RETURN_IF_ERROR(compare_fingerprints(header_, s, rank(), a.peer));
  if (a.inline_payload && a.bytes > 0) std::memcpy(a.out, s + kHeaderBytes, a.bytes);
  return Status::success();
}

Status CallCheck::exchange(Transport& base, const CallFingerprint& fp, Deadline deadline) {
  const int n = base.size();
  const int me = base.rank();
  std::byte mine[kFingerprintBytes];
  encode(fp, static_cast<std::uint32_t>(++seq_), mine);
  std::vector<std::byte> theirs(static_cast<std::size_t>(n) * kFingerprintBytes);
  std::vector<RequestId> ids;
  ids.reserve(2 * static_cast<std::size_t>(n));
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    HOOP_ASSIGN_OR_RETURN(
        RequestId r,
        base.recv(peer, theirs.data() + static_cast<std::size_t>(peer) * kFingerprintBytes,
                  kFingerprintBytes));
    ids.push_back(r);
    HOOP_ASSIGN_OR_RETURN(RequestId s, base.send(peer, mine, kFingerprintBytes));
    ids.push_back(s);
  }
  if (Status s = base.wait(ids, deadline); !s.ok()) {
    // A message of another length is a peer in another call, or in this one on host buffers
    // (whose first message carries its payload behind the header).
    if (s.code() != StatusCode::kProtocolError) return s;
    return Status(s.code(),
                  fmt::format("{} (this rank called {} and expected each peer's call header "
                              "alone: the ranks' calls differ, or some pass host buffers)",
                              s.message(), describe(fp, static_cast<std::uint32_t>(seq_))));
  }
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    HOOP_RETURN_IF_ERROR(compare_fingerprints(
        mine, theirs.data() + static_cast<std::size_t>(peer) * kFingerprintBytes, me, peer));
  }
  return Status::success();
}

void encode_fingerprint(const CallFingerprint& fp, std::uint64_t seq, std::byte* out) {
  encode(fp, static_cast<std::uint32_t>(seq), out);
}

std::uint64_t fingerprint_hash(const std::byte* encoded) {
  // One odd multiplier per word and a final avalanche: cheap on the hot path of every slot
  // call, and a field that differs changes the sum in bits no other field's difference cancels
  // in practice.
  constexpr std::uint64_t kMul[4] = {0x9E3779B97F4A7C15ULL, 0xBF58476D1CE4E5B9ULL,
                                     0x94D049BB133111EBULL, 0xD6E8FEB86659FD93ULL};
  std::uint64_t h = 0;
  for (std::size_t i = 0; i < kHeaderBytes / 8; ++i)
    h += get<std::uint64_t>(encoded + 8 * i) * kMul[i];
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 32);
}

Status compare_fingerprints(const std::byte* mine, const std::byte* theirs, int me, int peer) {
  // The common case costs one comparison; the texts below are built only for a mismatch.
  if (std::memcmp(theirs, mine, kHeaderBytes) == 0) return Status::success();
  const Decoded t = decode(theirs);
  const Decoded m = decode(mine);
  if (t.magic != kMagic)
    return protocol_error(fmt::format(
        "the first message of collective call {} from rank {} carries no call header: rank {} "
        "is not in a collective call of its own (a call that only some ranks made?)",
        m.seq, peer, peer));
  std::vector<std::string> diffs;
  auto field = [&](const char* name, const std::string& mine_text,
                   const std::string& theirs_text) {
    if (mine_text != theirs_text)
      diffs.push_back(fmt::format("{} differs (rank {}: {}, rank {}: {})", name, me, mine_text, peer,
                                  theirs_text));
  };
  field("collective", collective_name(m.fp.kind), collective_name(t.fp.kind));
  field("call number", fmt::format("{}", m.seq), fmt::format("{}", t.seq));
  field("dtype", dtype_text(m.fp.dtype), dtype_text(t.fp.dtype));
  field("op", op_text(m.fp.op), op_text(t.fp.op));
  field("count", opt_text(m.fp.count), opt_text(t.fp.count));
  field("root", opt_text(m.fp.root), opt_text(t.fp.root));
  field("counts", opt_text(m.fp.counts_hash), opt_text(t.fp.counts_hash));
  field("algorithm", algorithm_text(m.fp.algorithm), algorithm_text(t.fp.algorithm));
  field("buffers", m.fp.device ? "device" : "host", t.fp.device ? "device" : "host");
  if (diffs.empty()) return Status::success();
  return mismatch_error(
      fmt::format("mismatched collective calls: rank {} called {}, rank {} called {}: {}", me,
                  describe(m.fp, m.seq), peer, describe(t.fp, t.seq), fmt::join(diffs, "; ")));
}

}  // namespace hoop::collectives
