// Cryptographic helpers over OpenSSL for the HMAC handshakes of the store and the
// transports: keyed hashes, unpredictable nonces and secrets, and comparisons that do not
// leak where two MACs differ.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hoop/core.h"

namespace hoop::crypto {

inline constexpr std::size_t kSha256Bytes = 32;
using Sha256Digest = std::array<std::uint8_t, kSha256Bytes>;

/// HMAC-SHA256 of `data` under `key`.
Result<Sha256Digest> hmac_sha256(std::string_view key, std::string_view data);
/// `n` bytes from OpenSSL's CSPRNG; an error when it cannot be seeded.
Result<std::string> random_bytes(std::size_t n);
/// Initializes OpenSSL (with its configuration) now, on the calling thread. Called before a
/// static object starts a thread that uses OpenSSL: OpenSSL's cleanup at exit is registered by
/// its first use and must run after that object's destructor has joined the thread, which
/// frees its OpenSSL state with release_thread_state() (LeakSanitizer saw it leak otherwise).
void initialize();
/// Frees the calling thread's OpenSSL state (error queue, random generator); for a thread
/// about to end.
void release_thread_state();
/// 2 * `num_bytes` lowercase hex characters of CSPRNG output (job secrets, job ids).
Result<std::string> random_hex(std::size_t num_bytes);
/// Lowercase hex of `bytes`.
std::string to_hex(std::string_view bytes);
/// Whether `a` and `b` are equal, in time that depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

/// The digest's bytes as a string_view (valid while `digest` lives).
inline std::string_view as_view(const Sha256Digest& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

}  // namespace hoop::crypto
