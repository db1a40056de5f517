#include "core/bytes.h"

namespace hoop {

bool PayloadReader::u8(std::uint8_t& v) {
  if (rest_.empty()) return false;
  v = static_cast<std::uint8_t>(rest_[0]);
  rest_.remove_prefix(1);
  return true;
}

bool PayloadReader::u16(std::uint16_t& v) {
  if (rest_.size() < 2) return false;
  v = load_le<std::uint16_t>(rest_.data());
  rest_.remove_prefix(2);
  return true;
}

bool PayloadReader::u32(std::uint32_t& v) {
  if (rest_.size() < 4) return false;
  v = load_le<std::uint32_t>(rest_.data());
  rest_.remove_prefix(4);
  return true;
}

bool PayloadReader::u64(std::uint64_t& v) {
  if (rest_.size() < 8) return false;
  v = load_le<std::uint64_t>(rest_.data());
  rest_.remove_prefix(8);
  return true;
}

bool PayloadReader::bytes(std::size_t n, std::string_view& v) {
  if (rest_.size() < n) return false;
  v = rest_.substr(0, n);
  rest_.remove_prefix(n);
  return true;
}

bool PayloadReader::sized(std::size_t max, std::string_view& v) {
  std::uint32_t n = 0;
  if (rest_.size() < 4) return false;
  n = load_le<std::uint32_t>(rest_.data());
  if (n > max || rest_.size() - 4 < n) return false;
  rest_.remove_prefix(4);
  return bytes(n, v);
}

std::string_view PayloadReader::take_rest() {
  const std::string_view out = rest_;
  rest_ = {};
  return out;
}

}  // namespace hoop
