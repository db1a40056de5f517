#include "core/crypto.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <climits>

namespace hoop::crypto {
namespace {

// The reason OpenSSL gives for its most recent failure, which it keeps per thread.
std::string openssl_reason() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no reason given by OpenSSL";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

}  // namespace

Result<Sha256Digest> hmac_sha256(std::string_view key, std::string_view data) {
  if (key.size() > INT_MAX) return invalid_argument("hmac_sha256: key longer than 2 GiB");
  // OpenSSL treats a null key as "reuse the previous key"; an empty key must still be a key.
  static const unsigned char kEmpty = 0;
  const void* key_ptr = key.empty() ? &kEmpty : static_cast<const void*>(key.data());
  const auto* data_ptr =
      data.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(data.data());
  Sha256Digest out{};
  unsigned int out_len = 0;
  if (HMAC(EVP_sha256(), key_ptr, static_cast<int>(key.size()), data_ptr, data.size(), out.data(),
           &out_len) == nullptr ||
      out_len != out.size()) {
    return internal_error(fmt::format("HMAC-SHA256 failed: {}", openssl_reason()));
  }
  return out;
}

Result<std::string> random_bytes(std::size_t n) {
  std::string out(n, '\0');
  std::size_t done = 0;
  while (done < n) {
    const int chunk = static_cast<int>(std::min<std::size_t>(n - done, 1 << 20));
    if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data() + done), chunk) != 1) {
      return internal_error(fmt::format("could not draw {} random bytes: {}", n, openssl_reason()));
    }
    done += static_cast<std::size_t>(chunk);
  }
  return out;
}

void initialize() { OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, nullptr); }

void release_thread_state() { OPENSSL_thread_stop(); }

Result<std::string> random_hex(std::size_t num_bytes) {
  HOOP_ASSIGN_OR_RETURN(const std::string bytes, random_bytes(num_bytes));
  return to_hex(bytes);
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace hoop::crypto
