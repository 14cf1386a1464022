// What the beacon tests (peer_beacon_test, peer_beacon6_test) share: a cluster key made of one
// repeated byte, and bytes as lowercase hex (to pin a datagram against tests/e2e/beacon_forge.py).
#pragma once

#include <string>

#include "peer/cluster_key.h"

namespace cairn::testing {

inline ClusterKey key_of(char fill) {
  ClusterKey key;
  key.bytes = std::string(32, fill);
  key.id = cluster_key_id(key.bytes);
  return key;
}

inline std::string hex_of(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

}  // namespace cairn::testing
