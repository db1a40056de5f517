// Little-endian encoding for hoop's wire formats (the store protocol, the TCP transport):
// appending fixed-width integers to a frame, and reading fields off a received payload
// without ever reading past its end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hoop {

/// Appends `v` to `out` in little-endian byte order.
template <typename T>
void append_le(std::string& out, T v) {
  // One append, not a push_back (a capacity check) per byte: a runtime round encodes a few
  // dozen of these.
  char bytes[sizeof(T)];
  for (std::size_t i = 0; i < sizeof(T); ++i)
    bytes[i] = static_cast<char>(static_cast<std::uint8_t>(v >> (8 * i)));
  out.append(bytes, sizeof(T));
}

/// Reads a little-endian T from the sizeof(T) bytes at `p`.
template <typename T>
T load_le(const char* p) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<T>(static_cast<T>(static_cast<std::uint8_t>(p[i])) << (8 * i));
  }
  return v;
}

/// Reads fields off a payload; every read fails (returns false) instead of over-reading.
class PayloadReader {
 public:
  /// Reads from `payload`, which must outlive the reader and the views it hands out.
  explicit PayloadReader(std::string_view payload) : rest_(payload) {}
  /// Reads one byte.
  bool u8(std::uint8_t& v);
  /// Reads a little-endian u16.
  bool u16(std::uint16_t& v);
  /// Reads a little-endian u32.
  bool u32(std::uint32_t& v);
  /// Reads a little-endian u64.
  bool u64(std::uint64_t& v);
  /// Reads exactly `n` bytes.
  bool bytes(std::size_t n, std::string_view& v);
  /// Reads a u32 byte count (at most `max`) and that many bytes.
  bool sized(std::size_t max, std::string_view& v);
  /// Takes everything left.
  std::string_view take_rest();
  /// Bytes not read yet.
  std::size_t left() const { return rest_.size(); }

 private:
  std::string_view rest_;
};

}  // namespace hoop
