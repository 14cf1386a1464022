// Discovery beacons (docs/peers.md, "Discovery"): the UDP datagram an agent with a cluster key
// sends to the LAN every few seconds, and the checks a receiver makes before a beacon may
// propose a peer. A beacon never makes a peer usable: that takes the authenticated TLS
// connection (agent_client.h). It only names, under an HMAC of the cluster key, an address
// to try.
//
// Format 1 (an IPv4 address), 77 bytes, every integer big-endian:
//   0  "CRNB"           magic
//   4  u8  format        1
//   5  u16 protocol      the agent's peer protocol version (peer_protocol.h)
//   7  u8[4] address     the IPv4 address the agent is reached at (as the sender saw it)
//  11  u16 port          the agent's TCP port
//  13  u8[8] key id      the first 8 bytes of the key's SHA-256 (cluster_key.h's id, raw)
//  21  i64 timestamp     Unix time in milliseconds when sent
//  29  u8[16] nonce      random (RAND_bytes)
//  45  u8[32] hmac       HMAC-SHA256 of bytes 0..44 under the beacon subkey
// Format 2 (an IPv6 address), 89 bytes: the same fields in the same order, the address 16
// bytes (so port at 23, key id 25, timestamp 33, nonce 41, hmac 57 over bytes 0..56). A
// link-local address carries no scope: the receiver adds the interface it arrived on.
// The format names the address's family, not the transport: either may travel over IPv4 or
// IPv6.
// The subkey is HKDF-SHA256 (RFC 5869) of the key's bytes, salt "cairn beacon", info
// "cairn beacon hmac 1": never the TLS PSK, and neither can be had from the other.
//
// Thread-safety: the functions are pure; a BeaconChecker is used from one thread.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>

#include "common/status.h"
#include "peer/cluster_key.h"

namespace cairn {

inline constexpr size_t kBeaconBytes = 77;   // format 1
inline constexpr size_t kBeacon6Bytes = 89;  // format 2
inline constexpr uint8_t kBeaconFormat = 1;
inline constexpr uint8_t kBeacon6Format = 2;
// The UDP port beacons go to, and the administratively scoped (RFC 2365, IPv4 local scope)
// group they are multicast to.
inline constexpr uint16_t kDefaultBeaconPort = 7070;
inline constexpr const char* kBeaconGroup = "239.255.70.70";
// The IPv6 group (docs/peers.md "Discovery"): flags 1 (transient: not assigned by IANA,
// RFC 4291 §2.7), scope 2 (link-local: no router forwards it, as TTL 1 for IPv4).
inline constexpr const char* kBeaconGroup6 = "ff12::7070";

enum class BeaconFamily : uint8_t { kIpv4, kIpv6 };
// A beacon whose timestamp is further than this from the receiver's clock is dropped, and
// a nonce is remembered this long (so a replay is caught whatever its timestamp says).
inline constexpr int64_t kBeaconWindowMs = 30'000;
// How many nonces a checker remembers at most; beyond, the oldest are forgotten. Only
// beacons with a good HMAC are remembered, so only a key holder can fill it.
inline constexpr size_t kBeaconNonceCacheSize = 4096;

struct Beacon {
  uint16_t protocol = 0;
  BeaconFamily family = BeaconFamily::kIpv4;  // format 1 or 2
  std::array<uint8_t, 4> address{};           // kIpv4: network order
  std::array<uint8_t, 16> address6{};         // kIpv6: network order
  uint16_t port = 0;
  std::array<uint8_t, 8> key_id{};
  int64_t timestamp_ms = 0;
  std::array<uint8_t, 16> nonce{};

  std::string host_text() const;     // "10.0.0.5", "fe80::1" (no scope)
  std::string address_text() const;  // "10.0.0.5:7070", "[fe80::1]:7070"
  std::string key_id_hex() const;    // as cluster_key.h shows it
  bool unspecified() const;          // 0.0.0.0 or ::: "where the datagram came from"
};

// Why a datagram proposes nothing. Each is logged at most once per interval
// (beacon_drop_log.h).
enum class BeaconDrop {
  kMalformed,  // not a cairn beacon: wrong size (for its format) or magic
  kFormat,     // a cairn beacon of a format this cairn does not read (another version)
  kOtherKey,   // a well-formed beacon of another cluster key (or of a keyless sender)
  kForged,     // our key id, but the HMAC does not verify
  kStale,      // authentic, but its timestamp is outside the window (clock skew, or replay)
  kReplayed,   // authentic and fresh, but its nonce was already seen within the window
};
inline constexpr int kBeaconDropKinds = 6;
const char* beacon_drop_name(BeaconDrop drop);  // "malformed", "forged", …

// The 32-byte HMAC subkey of `key` (see above).
std::string beacon_subkey(const ClusterKey& key);

// The datagram of `beacon` (its key_id is overwritten with `key`'s), sealed under `key`:
// format 1 or 2 by its family.
std::string seal_beacon(Beacon beacon, const ClusterKey& key);

// A fresh beacon: now, a random nonce, the key's id, family IPv4 and the given address (the
// caller may set family and address6 instead). kFailed when the random source fails.
Result<Beacon> new_beacon(const ClusterKey& key, std::array<uint8_t, 4> address, uint16_t port,
                          uint16_t protocol, int64_t now_ms);

// The checks of one receiver: structure, key id, HMAC, timestamp window, replay cache.
class BeaconChecker {
 public:
  explicit BeaconChecker(const ClusterKey& key);

  struct Verdict {
    bool accepted = false;
    BeaconDrop drop = BeaconDrop::kMalformed;  // when not accepted
    std::string detail;                        // one short line, when not accepted
    Beacon beacon;                             // when accepted (and for kStale/kReplayed)
  };
  // Checks `datagram` received at `now_ms` (Unix milliseconds). Never throws; any bytes.
  Verdict check(std::string_view datagram, int64_t now_ms);

 private:
  std::string subkey_;
  std::array<uint8_t, 8> key_id_{};
  bool key_none_ = false;
  struct Seen {
    std::string nonce;
    int64_t until_ms;
  };
  std::deque<Seen> seen_order_;  // by insertion, for expiry and the size bound
  std::unordered_set<std::string> seen_;
};

// Unix time in milliseconds, from the system clock.
int64_t unix_now_ms();

}  // namespace cairn
