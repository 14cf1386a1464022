#include "peer/random_id.h"

#include <openssl/rand.h>

#include <vector>

namespace cairn {

Result<std::string> random_hex_id(size_t bytes, std::string_view what) {
  std::vector<unsigned char> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1)
    return Status::Failed("cannot draw random bytes for " + std::string(what));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char b : raw) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace cairn
