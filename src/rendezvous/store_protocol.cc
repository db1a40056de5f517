#include "rendezvous/store_protocol.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

namespace hoop::rendezvous {
namespace {

constexpr std::size_t kMaxQuotedKeyChars = 80;
constexpr std::size_t kMaxListedKeys = 16;

template <typename Keys>
std::string format_key_list(const Keys& keys) {
  std::string out;
  std::size_t shown = 0;
  for (const auto& key : keys) {
    if (shown == kMaxListedKeys) {
      out += fmt::format(", ... ({} more)", keys.size() - shown);
      break;
    }
    if (shown > 0) out += ", ";
    out += quote_key(key);
    ++shown;
  }
  return out;
}

}  // namespace

std::string opcode_name(std::uint8_t op) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kServerHello:
      return "server hello";
    case Opcode::kClientHello:
      return "client hello";
    case Opcode::kServerProof:
      return "server proof";
    case Opcode::kSet:
      return "set";
    case Opcode::kGet:
      return "get";
    case Opcode::kWait:
      return "wait";
    case Opcode::kAdd:
      return "add";
    case Opcode::kDelete:
      return "delete";
    case Opcode::kOk:
      return "ok";
    case Opcode::kWaitTimeout:
      return "wait timeout";
    case Opcode::kError:
      return "error";
  }
  return fmt::format("opcode {}", op);
}

FrameHeader decode_header(const char* bytes) {
  return FrameHeader{load_le<std::uint32_t>(bytes), static_cast<std::uint8_t>(bytes[4])};
}

std::size_t max_frame_payload(std::size_t max_value_bytes) {
  constexpr std::size_t kLengthLimit = std::numeric_limits<std::uint32_t>::max();
  constexpr std::size_t kFixed = kMaxKeyBytes + kRequestOverheadBytes;
  if (max_value_bytes >= kLengthLimit - kFixed) return kLengthLimit;
  return max_value_bytes + kFixed;
}

FrameBuilder::FrameBuilder(Opcode op, std::size_t payload_hint) {
  frame_.reserve(kFrameHeaderBytes + payload_hint);
  frame_.append(4, '\0');
  frame_.push_back(static_cast<char>(op));
}

FrameBuilder& FrameBuilder::u8(std::uint8_t v) {
  frame_.push_back(static_cast<char>(v));
  return *this;
}

FrameBuilder& FrameBuilder::u16(std::uint16_t v) {
  append_le(frame_, v);
  return *this;
}

FrameBuilder& FrameBuilder::u32(std::uint32_t v) {
  append_le(frame_, v);
  return *this;
}

FrameBuilder& FrameBuilder::u64(std::uint64_t v) {
  append_le(frame_, v);
  return *this;
}

FrameBuilder& FrameBuilder::bytes(std::string_view v) {
  frame_.append(v);
  return *this;
}

FrameBuilder& FrameBuilder::sized(std::string_view v) {
  return u32(static_cast<std::uint32_t>(v.size())).bytes(v);
}

std::string FrameBuilder::finish() {
  const auto length = static_cast<std::uint32_t>(frame_.size() - kFrameHeaderBytes);
  for (std::size_t i = 0; i < 4; ++i) frame_[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return std::move(frame_);
}

std::string encode_server_hello(const ServerHello& hello) {
  return FrameBuilder(Opcode::kServerHello, kMagic.size() + 4 + kNonceBytes)
      .bytes(kMagic)
      .u32(hello.version)
      .bytes(hello.nonce)
      .finish();
}

Result<ServerHello> decode_server_hello(std::string_view payload) {
  PayloadReader r(payload);
  std::string_view magic;
  std::string_view nonce;
  ServerHello hello;
  if (!r.bytes(kMagic.size(), magic) || magic != kMagic) {
    return protocol_error("the peer is not a hoop store (bad magic in its hello)");
  }
  if (!r.u32(hello.version) || !r.bytes(kNonceBytes, nonce) || r.left() != 0) {
    return protocol_error(fmt::format("malformed server hello ({} bytes, protocol version {})",
                                      payload.size(), hello.version));
  }
  hello.nonce = nonce;
  return hello;
}

std::string encode_client_hello(const ClientHello& hello) {
  return FrameBuilder(Opcode::kClientHello, 64 + hello.job_id.size() + kProofBytes)
      .bytes(kMagic)
      .u32(hello.version)
      .u32(static_cast<std::uint32_t>(hello.rank))
      .bytes(hello.nonce)
      .u16(static_cast<std::uint16_t>(hello.job_id.size()))
      .bytes(hello.job_id)
      .bytes(hello.proof)
      .finish();
}

Result<std::uint32_t> peek_client_version(std::string_view payload) {
  PayloadReader r(payload);
  std::string_view magic;
  std::uint32_t version = 0;
  if (!r.bytes(kMagic.size(), magic) || magic != kMagic) {
    return protocol_error("not a hoop store client (bad magic in its hello)");
  }
  if (!r.u32(version)) return protocol_error("client hello too short to carry a version");
  return version;
}

Result<ClientHello> decode_client_hello(std::string_view payload) {
  PayloadReader r(payload);
  std::string_view magic;
  std::string_view nonce;
  std::string_view job_id;
  std::string_view proof;
  std::uint32_t rank = 0;
  std::uint16_t job_id_len = 0;
  ClientHello hello;
  if (!r.bytes(kMagic.size(), magic) || magic != kMagic) {
    return protocol_error("not a hoop store client (bad magic in its hello)");
  }
  if (!r.u32(hello.version) || !r.u32(rank) || !r.bytes(kNonceBytes, nonce) || !r.u16(job_id_len) ||
      job_id_len > kMaxJobIdBytes || !r.bytes(job_id_len, job_id) || !r.bytes(kProofBytes, proof) ||
      r.left() != 0) {
    return protocol_error(fmt::format("malformed client hello ({} bytes)", payload.size()));
  }
  hello.rank = static_cast<std::int32_t>(rank);
  hello.nonce = nonce;
  hello.job_id = job_id;
  hello.proof = proof;
  return hello;
}

Result<crypto::Sha256Digest> handshake_proof(ProofRole role, std::string_view secret,
                                             const HandshakeTranscript& t) {
  std::string data(role == ProofRole::kClient ? kClientProofLabel : kServerProofLabel);
  append_le(data, t.version);
  data.append(t.server_nonce);
  data.append(t.client_nonce);
  append_le(data, static_cast<std::uint16_t>(t.job_id.size()));
  data.append(t.job_id);
  append_le(data, static_cast<std::uint32_t>(t.rank));
  return crypto::hmac_sha256(secret, data);
}

HelloVerdict verify_client_hello(std::string_view payload, std::string_view server_nonce,
                                 std::string_view secret, std::string_view job_id) {
  HelloVerdict verdict;
  auto version = peek_client_version(payload);
  if (!version.ok()) {
    verdict.refusal = version.status();
    return verdict;
  }
  if (*version != kProtocolVersion) {
    verdict.refusal = auth_failed(fmt::format(
        "protocol version mismatch: the client speaks version {}, this store speaks version {}",
        *version, kProtocolVersion));
    return verdict;
  }
  auto hello = decode_client_hello(payload);
  if (!hello.ok()) {
    verdict.refusal = hello.status();
    return verdict;
  }
  verdict.rank = hello->rank;
  if (hello->job_id != job_id) {
    verdict.refusal = auth_failed(
        fmt::format("job id mismatch: the client is in job {}, this store serves job {}",
                    quote_key(hello->job_id), quote_key(job_id)));
    return verdict;
  }
  const HandshakeTranscript transcript{kProtocolVersion, server_nonce, hello->nonce, hello->job_id,
                                       hello->rank};
  auto expected = handshake_proof(ProofRole::kClient, secret, transcript);
  auto proof = handshake_proof(ProofRole::kServer, secret, transcript);
  if (!expected.ok() || !proof.ok()) {
    verdict.refusal = expected.ok() ? proof.status() : expected.status();
  } else if (!crypto::constant_time_equal(crypto::as_view(*expected), hello->proof)) {
    verdict.refusal = auth_failed("authentication failed: wrong job secret");
  } else {
    verdict.answer =
        FrameBuilder(Opcode::kServerProof, kProofBytes).bytes(crypto::as_view(*proof)).finish();
  }
  return verdict;
}

Result<std::int64_t> add_to_counter(std::string_view key, const std::string* current,
                                    std::int64_t delta) {
  std::int64_t value = 0;
  if (current != nullptr) {
    const char* end = current->data() + current->size();
    const auto [stop, ec] = std::from_chars(current->data(), end, value);
    if (current->empty() || ec != std::errc() || stop != end) {
      return invalid_argument(fmt::format("store key {} holds {}, which is not an add() counter",
                                          quote_key(key), quote_key(*current)));
    }
  }
  std::int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    return invalid_argument(fmt::format("adding {} to store counter {} (now {}) overflows int64",
                                        delta, quote_key(key), value));
  }
  return sum;
}

Status validate_key(std::string_view key) {
  if (key.empty()) return invalid_argument("store keys must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return invalid_argument(fmt::format("store key {} is {} bytes; the limit is {}", quote_key(key),
                                        key.size(), kMaxKeyBytes));
  }
  return Status::success();
}

std::string encode_set(std::string_view key, std::string_view value) {
  return FrameBuilder(Opcode::kSet, 4 + key.size() + value.size()).sized(key).bytes(value).finish();
}

std::string encode_get(std::string_view key) {
  return FrameBuilder(Opcode::kGet, key.size()).bytes(key).finish();
}

std::string encode_wait(const std::vector<std::string>& keys, std::uint64_t timeout_ms) {
  std::size_t hint = 12;
  for (const std::string& key : keys) hint += 4 + key.size();
  FrameBuilder frame(Opcode::kWait, hint);
  frame.u64(timeout_ms).u32(static_cast<std::uint32_t>(keys.size()));
  for (const std::string& key : keys) frame.sized(key);
  return frame.finish();
}

std::string encode_add(std::string_view key, std::int64_t delta) {
  return FrameBuilder(Opcode::kAdd, 8 + key.size())
      .u64(static_cast<std::uint64_t>(delta))
      .bytes(key)
      .finish();
}

std::string encode_delete(std::string_view key) {
  return FrameBuilder(Opcode::kDelete, key.size()).bytes(key).finish();
}

Result<Request> decode_request(std::uint8_t op, std::string_view payload) {
  PayloadReader r(payload);
  Request req;
  req.op = static_cast<Opcode>(op);
  const auto malformed = [&] {
    return protocol_error(
        fmt::format("malformed {} request ({} bytes)", opcode_name(op), payload.size()));
  };
  switch (req.op) {
    case Opcode::kSet:
      // The key length is checked against the payload, not kMaxKeyBytes, so that an
      // over-long key is answered as a bad argument rather than a broken frame.
      if (!r.sized(payload.size(), req.key)) return malformed();
      req.value = r.take_rest();
      break;
    case Opcode::kGet:
    case Opcode::kDelete:
      req.key = r.take_rest();
      break;
    case Opcode::kAdd: {
      std::uint64_t delta = 0;
      if (!r.u64(delta)) return malformed();
      req.delta = static_cast<std::int64_t>(delta);
      req.key = r.take_rest();
      break;
    }
    case Opcode::kWait: {
      std::uint32_t count = 0;
      if (!r.u64(req.timeout_ms) || !r.u32(count)) return malformed();
      // Each key costs at least its 4-byte length, which bounds the count before reserving.
      if (count > r.left() / 4) return malformed();
      req.keys.reserve(count);
      for (std::uint32_t i = 0; i < count; ++i) {
        std::string_view key;
        if (!r.sized(r.left(), key)) return malformed();
        HOOP_RETURN_IF_ERROR(validate_key(key));
        req.keys.push_back(key);
      }
      if (r.left() != 0) return malformed();
      return req;
    }
    default:
      return protocol_error(
          fmt::format("unexpected {} frame where a request belongs", opcode_name(op)));
  }
  HOOP_RETURN_IF_ERROR(validate_key(req.key));
  return req;
}

std::string encode_ok(std::string_view payload) {
  return FrameBuilder(Opcode::kOk, payload.size()).bytes(payload).finish();
}

std::string encode_ok_i64(std::int64_t value) {
  return FrameBuilder(Opcode::kOk, 8).u64(static_cast<std::uint64_t>(value)).finish();
}

std::string encode_error(const Status& status) {
  return FrameBuilder(Opcode::kError, 1 + status.message().size())
      .u8(static_cast<std::uint8_t>(status.code()))
      .bytes(status.message())
      .finish();
}

std::string encode_wait_timeout(const std::vector<std::string_view>& missing) {
  std::size_t hint = 4;
  for (std::string_view key : missing) hint += 4 + key.size();
  FrameBuilder frame(Opcode::kWaitTimeout, hint);
  frame.u32(static_cast<std::uint32_t>(missing.size()));
  for (std::string_view key : missing) frame.sized(key);
  return frame.finish();
}

Status decode_error(std::string_view payload) {
  PayloadReader r(payload);
  std::uint8_t code = 0;
  if (!r.u8(code) || code == static_cast<std::uint8_t>(StatusCode::kOk) ||
      code > static_cast<std::uint8_t>(StatusCode::kInternal)) {
    return protocol_error(fmt::format("malformed error answer ({} bytes)", payload.size()));
  }
  return Status(static_cast<StatusCode>(code), std::string(r.take_rest()));
}

Result<std::vector<std::string>> decode_wait_timeout(std::string_view payload) {
  PayloadReader r(payload);
  std::uint32_t count = 0;
  if (!r.u32(count) || count > r.left() / 4) {
    return protocol_error("malformed wait-timeout answer");
  }
  std::vector<std::string> keys;
  keys.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string_view key;
    if (!r.sized(kMaxKeyBytes, key)) return protocol_error("malformed wait-timeout answer");
    keys.emplace_back(key);
  }
  if (r.left() != 0) return protocol_error("malformed wait-timeout answer");
  return keys;
}

Result<std::int64_t> decode_ok_i64(std::string_view payload) {
  PayloadReader r(payload);
  std::uint64_t v = 0;
  if (!r.u64(v) || r.left() != 0) {
    return protocol_error(fmt::format("malformed add answer ({} bytes)", payload.size()));
  }
  return static_cast<std::int64_t>(v);
}

std::string quote_key(std::string_view key) {
  std::string out = "\"";
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (out.size() >= kMaxQuotedKeyChars) {
      out += fmt::format("...\" ({} bytes)", key.size());
      return out;
    }
    const auto c = static_cast<unsigned char>(key[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

std::string format_keys(const std::vector<std::string_view>& keys) { return format_key_list(keys); }

std::string format_keys(const std::vector<std::string>& keys) { return format_key_list(keys); }

}  // namespace hoop::rendezvous
