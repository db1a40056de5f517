// Wire format of the rendezvous store (protocol version 1).
//
// Frames. Every message in both directions is one frame:
//
//   u32 length (little-endian) | u8 opcode | `length` bytes of payload
//
// `length` counts the payload only. A reader checks it against a cap BEFORE it allocates
// anything: kMaxHandshakePayload until the handshake is done, max_frame_payload() after.
// Integers are little-endian; i32/i64 are two's complement. A "sized" string is a u32 byte
// count followed by the bytes. A key is 1..kMaxKeyBytes arbitrary bytes.
//
// Handshake (mutual, before any request):
//
//   server -> kServerHello : magic[8] | u32 version | server_nonce[32]
//   client -> kClientHello : magic[8] | u32 version | i32 rank | client_nonce[32]
//                            | u16 job_id_len | job_id | client_proof[32]
//   server -> kServerProof : server_proof[32]            (accepted)
//          or kError       : u8 status code | reason     (refused; the server closes)
//
// magic and version open both hellos in every protocol version, so a peer of another
// version is told "version mismatch" rather than "garbage". The server checks, in order:
// magic, version, job id, then client_proof (constant-time). Proofs are HMAC-SHA256 under
// the job secret over the transcript
//
//   label | u32 version | server_nonce | client_nonce | u16 job_id_len | job_id | i32 rank
//
// with label kClientProofLabel or kServerProofLabel (domain separation: a client's proof is
// never valid as the server's). Fresh nonces on both sides make every proof single-use, and
// the client checks server_proof, so it never talks to a server without the secret.
//
// Requests (one frame each) and their answers (one frame each, in request order):
//
//   kSet    : u32 key_len | key | value (the rest)     -> kOk (empty)
//   kGet    : key (the whole payload)                   -> kOk value | kError not_found
//   kWait   : u64 timeout_ms | u32 count | count * sized key
//                                                       -> kOk (empty) once every key is set
//                                                        | kWaitTimeout u32 count | sized keys
//                                                          (the keys still missing)
//   kAdd    : i64 delta | key (the rest)                -> kOk i64 new value
//                                                        | kError invalid_argument (not a counter)
//   kDelete : key (the whole payload)                   -> kOk u8 existed (0 or 1)
//
// Any request may also be answered with kError (u8 status code | message). A frame that is
// malformed, oversized or has an unknown opcode ends the connection after a kError answer.
// add() counters are stored as decimal ASCII text, so get() of a counter returns e.g. "5".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/bytes.h"
#include "core/crypto.h"
#include "hoop/core.h"

namespace hoop::rendezvous {

inline constexpr std::string_view kMagic = "HOOPSTOR";
inline constexpr std::uint32_t kProtocolVersion = 1;
inline constexpr std::size_t kFrameHeaderBytes = 5;
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = crypto::kSha256Bytes;
inline constexpr std::size_t kMaxHandshakePayload = 4096;
inline constexpr std::size_t kMaxKeyBytes = 4096;
inline constexpr std::size_t kMaxJobIdBytes = 1024;
// Room for a request's fixed fields (lengths, counts, timeout, delta) around key and value.
inline constexpr std::size_t kRequestOverheadBytes = 64;
inline constexpr std::string_view kClientProofLabel{"hoop-store client proof v1\0", 27};
inline constexpr std::string_view kServerProofLabel{"hoop-store server proof v1\0", 27};

enum class Opcode : std::uint8_t {
  kServerHello = 1,
  kClientHello = 2,
  kServerProof = 3,
  kSet = 16,
  kGet = 17,
  kWait = 18,
  kAdd = 19,
  kDelete = 20,
  kOk = 32,
  kWaitTimeout = 33,
  kError = 34,
};

/// Name of an opcode for messages ("set", "server hello", "opcode 99").
std::string opcode_name(std::uint8_t op);

/// A frame header as read off the wire; `op` stays raw because a peer may send any byte.
struct FrameHeader {
  std::uint32_t length = 0;
  std::uint8_t op = 0;
};

/// Decodes the kFrameHeaderBytes bytes at `bytes`.
FrameHeader decode_header(const char* bytes);
/// The largest payload any frame may carry after the handshake, given the store's
/// max_value_bytes (saturating; never more than a u32 length can say).
std::size_t max_frame_payload(std::size_t max_value_bytes);

/// Builds one frame: the payload is appended piece by piece and the length filled in last.
class FrameBuilder {
 public:
  /// Starts a frame of `op`, reserving room for `payload_hint` payload bytes.
  explicit FrameBuilder(Opcode op, std::size_t payload_hint = 0);
  /// Appends one byte.
  FrameBuilder& u8(std::uint8_t v);
  /// Appends a little-endian u16.
  FrameBuilder& u16(std::uint16_t v);
  /// Appends a little-endian u32.
  FrameBuilder& u32(std::uint32_t v);
  /// Appends a little-endian u64.
  FrameBuilder& u64(std::uint64_t v);
  /// Appends raw bytes.
  FrameBuilder& bytes(std::string_view v);
  /// Appends a u32 byte count and the bytes.
  FrameBuilder& sized(std::string_view v);
  /// The finished frame (header with the payload length, then the payload); leaves the
  /// builder empty.
  std::string finish();

 private:
  std::string frame_;
};

/// The server's first message.
struct ServerHello {
  std::uint32_t version = kProtocolVersion;
  std::string nonce;
};

/// The client's answer to ServerHello.
struct ClientHello {
  std::uint32_t version = kProtocolVersion;
  std::int32_t rank = -1;
  std::string nonce;
  std::string job_id;
  std::string proof;
};

/// The bytes both proofs are computed over.
struct HandshakeTranscript {
  std::uint32_t version = kProtocolVersion;
  std::string_view server_nonce;
  std::string_view client_nonce;
  std::string_view job_id;
  std::int32_t rank = -1;
};

/// Which side a proof is for; each has its own label.
enum class ProofRole { kClient, kServer };

/// The kServerHello frame.
std::string encode_server_hello(const ServerHello& hello);
/// Parses a kServerHello payload; protocol_error when it is not one.
Result<ServerHello> decode_server_hello(std::string_view payload);
/// The kClientHello frame.
std::string encode_client_hello(const ClientHello& hello);
/// Checks the magic of a kClientHello payload and returns its version, which is readable in
/// every protocol version; protocol_error when the magic is wrong.
Result<std::uint32_t> peek_client_version(std::string_view payload);
/// Parses a kClientHello payload of the current version; protocol_error when malformed.
Result<ClientHello> decode_client_hello(std::string_view payload);
/// HMAC-SHA256 under `secret` of `role`'s label and the transcript.
Result<crypto::Sha256Digest> handshake_proof(ProofRole role, std::string_view secret,
                                             const HandshakeTranscript& transcript);

/// The server's decision on a client hello.
struct HelloVerdict {
  /// Ok when accepted; else kAuthFailed (wrong version, job id or secret) or kProtocolError
  /// (not a well-formed hello), with the reason to log and send back.
  Status refusal;
  /// The rank the hello claims (only for naming the peer in logs); -1 when unknown.
  std::int32_t rank = -1;
  /// When accepted: the kServerProof frame to answer with.
  std::string answer;
};

/// Checks a kClientHello payload, in order: magic, version, job id, then the client's proof
/// (in constant time), against the server's nonce, the job secret and the job id.
HelloVerdict verify_client_hello(std::string_view payload, std::string_view server_nonce,
                                 std::string_view secret, std::string_view job_id);

/// The value add() stores after adding `delta` to `current` (nullptr: the key is not set,
/// counting as 0). invalid_argument when `current` is not a decimal int64 or the sum
/// overflows. Counters are decimal ASCII so that get() of one reads naturally ("5").
Result<std::int64_t> add_to_counter(std::string_view key, const std::string* current,
                                    std::int64_t delta);

/// A decoded request; views point into the payload it was decoded from.
struct Request {
  Opcode op = Opcode::kGet;
  std::string_view key;                // set, get, add, delete
  std::string_view value;              // set
  std::int64_t delta = 0;              // add
  std::uint64_t timeout_ms = 0;        // wait
  std::vector<std::string_view> keys;  // wait
};

/// invalid_argument unless 1 <= key.size() <= kMaxKeyBytes.
Status validate_key(std::string_view key);
/// The kSet frame.
std::string encode_set(std::string_view key, std::string_view value);
/// The kGet frame.
std::string encode_get(std::string_view key);
/// The kWait frame.
std::string encode_wait(const std::vector<std::string>& keys, std::uint64_t timeout_ms);
/// The kAdd frame.
std::string encode_add(std::string_view key, std::int64_t delta);
/// The kDelete frame.
std::string encode_delete(std::string_view key);
/// Parses a request frame: protocol_error for a malformed frame or unknown opcode (the
/// connection cannot go on), invalid_argument for a well-formed request with a bad key.
Result<Request> decode_request(std::uint8_t op, std::string_view payload);

/// A kOk frame carrying `payload`.
std::string encode_ok(std::string_view payload = {});
/// A kOk frame carrying one i64.
std::string encode_ok_i64(std::int64_t value);
/// A kError frame carrying `status` (which must not be ok).
std::string encode_error(const Status& status);
/// A kWaitTimeout frame listing `missing`.
std::string encode_wait_timeout(const std::vector<std::string_view>& missing);
/// The Status a kError payload carries; protocol_error when the payload is malformed.
Status decode_error(std::string_view payload);
/// The keys of a kWaitTimeout payload.
Result<std::vector<std::string>> decode_wait_timeout(std::string_view payload);
/// The i64 of a kOk answer to add.
Result<std::int64_t> decode_ok_i64(std::string_view payload);

/// A key for messages: quoted, non-printable bytes escaped, long keys shortened.
std::string quote_key(std::string_view key);
/// Keys for messages: quoted, comma-separated, the list shortened when long.
std::string format_keys(const std::vector<std::string_view>& keys);
/// format_keys for owned strings.
std::string format_keys(const std::vector<std::string>& keys);

}  // namespace hoop::rendezvous
