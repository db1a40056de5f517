// Wire format of the TCP transport (protocol version 1).
//
// Handshake. Every connection opens with a mutual HMAC handshake in the style of the
// rendezvous store's. Handshake frames are `u32 length (LE) | u8 type | payload`, and a
// reader checks `length` against kMaxHandshakePayload before it allocates anything. The
// rank with the higher number connects (the client); the lower one accepts (the server):
//
//   server -> kHello       : magic[8] | u32 version | i32 server_rank | server_nonce[32]
//   client -> kClientHello : magic[8] | u32 version | i32 client_rank | u32 socket_index
//                            | client_nonce[32] | u16 len | job_id | u16 len | mesh | proof[32]
//   server -> kProof       : proof[32]                        (accepted)
//          or kRefuse      : u8 status code | reason           (refused; the server closes)
//
// Proofs are HMAC-SHA256 under the job secret over
//
//   label | u32 version | server_nonce | client_nonce | u16 len | job_id | u16 len | mesh
//   | i32 client_rank | i32 server_rank | u32 socket_index
//
// with a client and a server label, so one side's proof is never valid as the other's and
// fresh nonces make every proof single-use. `mesh` is the store key prefix of the mesh, so a
// connection meant for one mesh is refused by another mesh of the same job.
//
// Data. After the handshake every frame is a 16-byte header and a payload:
//
//   u8 type | 7 zero bytes | u64 length (LE) | payload
//
//   kData    : one part of a message; `length` is the whole message's length, the payload is
//              this socket's part of it (see stripe_part)
//   kAwaited : as kData, for a message whose receiver posts its receive without waiting for
//              the send (Transport::send_awaited, send_lent): a large one that arrives before
//              its receive is left in the socket until the receive is posted, so that it is
//              read once, into the receive buffer, and the sender is held back meanwhile
//   kAbort   : u8 status code | cause text (at most kMaxAbortPayload bytes): the sender has
//              failed with this cause
//   kGoodbye : empty; the sender shut its transport down in order, so the end of the stream
//              that follows is not a failure
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/crypto.h"
#include "hoop/core.h"

namespace hoop::tcp::wire {

inline constexpr std::string_view kMagic{"HOOPTCP\0", 8};
inline constexpr std::uint32_t kProtocolVersion = 1;
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = crypto::kSha256Bytes;
inline constexpr std::size_t kHandshakeHeaderBytes = 5;
inline constexpr std::size_t kMaxHandshakePayload = 4096;
inline constexpr std::size_t kMaxIdBytes = 1024;
inline constexpr std::size_t kFrameHeaderBytes = 16;
inline constexpr std::size_t kMaxAbortPayload = 64 << 10;

enum class HandshakeType : std::uint8_t { kHello = 1, kClientHello = 2, kProof = 3, kRefuse = 4 };
enum class FrameType : std::uint8_t { kData = 1, kAbort = 2, kGoodbye = 3, kAwaited = 4 };

/// The server's first message.
struct Hello {
  std::uint32_t version = kProtocolVersion;
  std::int32_t rank = -1;
  std::string nonce;
};

/// The client's answer to Hello.
struct ClientHello {
  std::uint32_t version = kProtocolVersion;
  std::int32_t rank = -1;
  std::uint32_t socket_index = 0;
  std::string nonce;
  std::string job_id;
  std::string mesh;
  std::string proof;
};

/// The fields both proofs cover.
struct Transcript {
  std::string_view server_nonce;
  std::string_view client_nonce;
  std::string_view job_id;
  std::string_view mesh;
  std::int32_t client_rank = -1;
  std::int32_t server_rank = -1;
  std::uint32_t socket_index = 0;
};

/// Which side a proof is for.
enum class Role { kClient, kServer };

/// One handshake frame: header and payload.
std::string handshake_frame(HandshakeType type, std::string_view payload);
/// The kHello frame.
std::string encode_hello(const Hello& hello);
/// Parses a kHello payload; protocol_error when malformed, auth_failed for another version.
Result<Hello> decode_hello(std::string_view payload);
/// The kClientHello frame.
std::string encode_client_hello(const ClientHello& hello);
/// Parses a kClientHello payload: protocol_error when it is not one (bad magic, malformed),
/// auth_failed naming both versions when it speaks another protocol version.
Result<ClientHello> decode_client_hello(std::string_view payload);
/// HMAC-SHA256 under `secret` of `role`'s label and the transcript.
Result<crypto::Sha256Digest> proof(Role role, std::string_view secret, const Transcript& t);
/// The kRefuse frame carrying `reason` (not ok).
std::string encode_refusal(const Status& reason);
/// The Status a kRefuse payload carries; protocol_error when malformed.
Status decode_refusal(std::string_view payload);

/// A data-path frame header as read off the wire.
struct FrameHeader {
  FrameType type = FrameType::kData;
  std::uint64_t length = 0;
};

/// Writes the kFrameHeaderBytes header of a frame to `out`.
void encode_frame_header(FrameType type, std::uint64_t length, char* out);
/// Decodes and validates a header: known type, zero padding, and for kAbort and kGoodbye a
/// length within their limits (checked before anything is allocated for the payload).
Result<FrameHeader> decode_frame_header(const char* bytes);
/// A whole kAbort frame carrying `cause` (not ok), its text cut to the payload limit.
std::string encode_abort(const Status& cause);
/// The Status a kAbort payload carries; protocol_error when malformed.
Status decode_abort(std::string_view payload);

/// Where one socket's part of a striped message lies.
struct Part {
  std::size_t offset = 0;
  std::size_t size = 0;
};

/// Striping rule, the same on both sides: a message of `total` bytes sent over `count`
/// sockets is cut into `count` consecutive parts, part i going over socket i; the first
/// total % count parts are one byte longer than the others. Every socket carries a frame for
/// every message, even an empty part, so each socket's stream stays in message order.
Part stripe_part(std::uint64_t total, int index, int count);

}  // namespace hoop::tcp::wire
