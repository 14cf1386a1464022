// Hex encoding for binary values passed through the rendezvous table, which carries only
// printable strings (Gloo's addresses, NCCL's unique id).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace cairn::sdk_detail {

inline std::string to_hex(const void* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

// False when `text` is not exactly 2 × `size` lower-case hex digits.
inline bool from_hex(const std::string& text, void* out, size_t size) {
  if (text.size() != size * 2) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  auto* bytes = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < size; ++i) {
    const int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

// Any length: false when `text` has an odd length or a non-hex digit.
inline bool from_hex(const std::string& text, std::vector<char>& out) {
  if (text.size() % 2 != 0) return false;
  out.resize(text.size() / 2);
  return from_hex(text, out.data(), out.size());
}

}  // namespace cairn::sdk_detail
