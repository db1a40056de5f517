#include "transports/tcp/tcp_wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/bytes.h"

namespace hoop::tcp::wire {
namespace {

constexpr std::string_view kClientLabel{"hoop-tcp client proof v1\0", 25};
constexpr std::string_view kServerLabel{"hoop-tcp server proof v1\0", 25};

void append_sized16(std::string& out, std::string_view v) {
  append_le(out, static_cast<std::uint16_t>(v.size()));
  out.append(v);
}

bool read_sized16(PayloadReader& r, std::string_view& v) {
  std::uint16_t n = 0;
  return r.u16(n) && n <= kMaxIdBytes && r.bytes(n, v);
}

// Checks the magic and reads the version that follows it in every protocol version.
Result<std::uint32_t> read_magic_and_version(PayloadReader& r, std::string_view what) {
  std::string_view magic;
  std::uint32_t version = 0;
  if (!r.bytes(kMagic.size(), magic) || magic != kMagic) {
    return protocol_error(fmt::format("not a hoop tcp peer (bad magic in its {})", what));
  }
  if (!r.u32(version)) return protocol_error(fmt::format("{} too short for a version", what));
  if (version != kProtocolVersion) {
    return auth_failed(fmt::format(
        "protocol version mismatch: the peer speaks version {}, this rank speaks version {}",
        version, kProtocolVersion));
  }
  return version;
}

bool valid_status_code(std::uint8_t code) {
  return code > static_cast<std::uint8_t>(StatusCode::kOk) &&
         code <= static_cast<std::uint8_t>(StatusCode::kInternal);
}

}  // namespace

std::string handshake_frame(HandshakeType type, std::string_view payload) {
  std::string out;
  out.reserve(kHandshakeHeaderBytes + payload.size());
  append_le(out, static_cast<std::uint32_t>(payload.size()));
  out.push_back(static_cast<char>(type));
  out.append(payload);
  return out;
}

std::string encode_hello(const Hello& hello) {
  std::string p(kMagic);
  append_le(p, hello.version);
  append_le(p, static_cast<std::uint32_t>(hello.rank));
  p.append(hello.nonce);
  return handshake_frame(HandshakeType::kHello, p);
}

Result<Hello> decode_hello(std::string_view payload) {
  PayloadReader r(payload);
  Hello hello;
  HOOP_ASSIGN_OR_RETURN(hello.version, read_magic_and_version(r, "hello"));
  std::uint32_t rank = 0;
  std::string_view nonce;
  if (!r.u32(rank) || !r.bytes(kNonceBytes, nonce) || r.left() != 0) {
    return protocol_error(fmt::format("malformed hello ({} bytes)", payload.size()));
  }
  hello.rank = static_cast<std::int32_t>(rank);
  hello.nonce = nonce;
  return hello;
}

std::string encode_client_hello(const ClientHello& hello) {
  std::string p(kMagic);
  append_le(p, hello.version);
  append_le(p, static_cast<std::uint32_t>(hello.rank));
  append_le(p, hello.socket_index);
  p.append(hello.nonce);
  append_sized16(p, hello.job_id);
  append_sized16(p, hello.mesh);
  p.append(hello.proof);
  return handshake_frame(HandshakeType::kClientHello, p);
}

Result<ClientHello> decode_client_hello(std::string_view payload) {
  PayloadReader r(payload);
  ClientHello hello;
  HOOP_ASSIGN_OR_RETURN(hello.version, read_magic_and_version(r, "client hello"));
  std::uint32_t rank = 0;
  std::string_view nonce, job_id, mesh, proof;
  if (!r.u32(rank) || !r.u32(hello.socket_index) || !r.bytes(kNonceBytes, nonce) ||
      !read_sized16(r, job_id) || !read_sized16(r, mesh) || !r.bytes(kProofBytes, proof) ||
      r.left() != 0) {
    return protocol_error(fmt::format("malformed client hello ({} bytes)", payload.size()));
  }
  hello.rank = static_cast<std::int32_t>(rank);
  hello.nonce = nonce;
  hello.job_id = job_id;
  hello.mesh = mesh;
  hello.proof = proof;
  return hello;
}

Result<crypto::Sha256Digest> proof(Role role, std::string_view secret, const Transcript& t) {
  std::string data(role == Role::kClient ? kClientLabel : kServerLabel);
  append_le(data, kProtocolVersion);
  data.append(t.server_nonce);
  data.append(t.client_nonce);
  append_sized16(data, t.job_id);
  append_sized16(data, t.mesh);
  append_le(data, static_cast<std::uint32_t>(t.client_rank));
  append_le(data, static_cast<std::uint32_t>(t.server_rank));
  append_le(data, t.socket_index);
  return crypto::hmac_sha256(secret, data);
}

std::string encode_refusal(const Status& reason) {
  std::string p(1, static_cast<char>(reason.code()));
  p.append(reason.message().substr(0, kMaxHandshakePayload - 1));
  return handshake_frame(HandshakeType::kRefuse, p);
}

Status decode_refusal(std::string_view payload) {
  if (payload.empty() || !valid_status_code(static_cast<std::uint8_t>(payload[0]))) {
    return protocol_error("malformed refusal");
  }
  return Status(static_cast<StatusCode>(payload[0]), std::string(payload.substr(1)));
}

void encode_frame_header(FrameType type, std::uint64_t length, char* out) {
  std::memset(out, 0, kFrameHeaderBytes);
  out[0] = static_cast<char>(type);
  for (std::size_t i = 0; i < 8; ++i) out[8 + i] = static_cast<char>((length >> (8 * i)) & 0xff);
}

Result<FrameHeader> decode_frame_header(const char* bytes) {
  FrameHeader h;
  const auto type = static_cast<std::uint8_t>(bytes[0]);
  for (std::size_t i = 1; i < 8; ++i) {
    if (bytes[i] != 0) return protocol_error("malformed frame header (non-zero padding)");
  }
  for (std::size_t i = 0; i < 8; ++i) {
    h.length |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes[8 + i])) << (8 * i);
  }
  switch (static_cast<FrameType>(type)) {
    case FrameType::kData:
    case FrameType::kAwaited:
      break;
    case FrameType::kAbort:
      if (h.length == 0 || h.length > kMaxAbortPayload) {
        return protocol_error(
            fmt::format("abort frame of {} bytes (limit {})", h.length, kMaxAbortPayload));
      }
      break;
    case FrameType::kGoodbye:
      if (h.length != 0) return protocol_error("goodbye frame with a payload");
      break;
    default:
      return protocol_error(fmt::format("unknown frame type {}", type));
  }
  h.type = static_cast<FrameType>(type);
  return h;
}

std::string encode_abort(const Status& cause) {
  const std::string_view text = std::string_view(cause.message()).substr(0, kMaxAbortPayload - 1);
  std::string out(kFrameHeaderBytes, '\0');
  encode_frame_header(FrameType::kAbort, 1 + text.size(), out.data());
  const StatusCode code = cause.ok() ? StatusCode::kAborted : cause.code();
  out.push_back(static_cast<char>(code));
  out.append(text);
  return out;
}

Status decode_abort(std::string_view payload) {
  if (payload.empty() || !valid_status_code(static_cast<std::uint8_t>(payload[0]))) {
    return protocol_error("malformed abort frame");
  }
  return Status(static_cast<StatusCode>(payload[0]), std::string(payload.substr(1)));
}

Part stripe_part(std::uint64_t total, int index, int count) {
  const auto n = static_cast<std::uint64_t>(count);
  const auto i = static_cast<std::uint64_t>(index);
  const std::uint64_t base = total / n;
  const std::uint64_t extra = total % n;
  return Part{static_cast<std::size_t>(i * base + std::min(i, extra)),
              static_cast<std::size_t>(base + (i < extra ? 1 : 0))};
}

}  // namespace hoop::tcp::wire
