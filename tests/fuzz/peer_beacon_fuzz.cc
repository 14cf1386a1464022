// libFuzzer target: datagrams as anyone on the LAN can send them to `cairn peers`, checked by
// a BeaconChecker (peer/beacon.h) as discovery does. Each input is split into datagrams (a
// length byte before each), all checked by one checker, so replays and the nonce cache are
// exercised too. Any crash, sanitizer report or broken invariant (abort) is a finding.
//
// Built like peer_frame_fuzz (CMakeLists.txt); ctest runs it over
// tests/fuzz/corpus/peer_beacon for a bounded number of runs. To fuzz longer:
//   build/fuzz/peer_beacon_fuzz -max_total_time=600 tests/fuzz/corpus/peer_beacon
// The corpus's genuine beacons are sealed with the key below, stamped kNow
// (tests/fuzz/corpus/make_beacons.py).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "peer/beacon.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr int64_t kNow = 1'800'000'000'000;

cairn::ClusterKey fuzz_key() {
  cairn::ClusterKey key;
  key.bytes = std::string(32, 'a');
  key.id = "fuzz";
  return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cairn::ClusterKey key = fuzz_key();
  // Copied, not made: deriving the subkey each time would cost more than the checks.
  static const cairn::BeaconChecker prototype(key);
  cairn::BeaconChecker checker = prototype;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    // A length byte of 255 means "the rest", so datagrams of any size are tried.
    const size_t wanted = static_cast<uint8_t>(rest[0]);
    rest.remove_prefix(1);
    const size_t length = wanted == 255 ? rest.size() : std::min(wanted, rest.size());
    const std::string_view datagram = rest.substr(0, length);
    rest.remove_prefix(length);
    auto verdict = checker.check(datagram, kNow);
    check(verdict.accepted || !verdict.detail.empty());
    check(verdict.detail.find('\n') == std::string::npos && verdict.detail.size() < 400);
    if (!verdict.accepted) continue;
    // Accepted only what a key holder sealed: the same fields seal to the same bytes…
    check(datagram.size() == (verdict.beacon.family == cairn::BeaconFamily::kIpv6
                                  ? cairn::kBeacon6Bytes
                                  : cairn::kBeaconBytes));
    check(cairn::seal_beacon(verdict.beacon, key) == datagram);
    // …fresh, and never twice.
    const int64_t skew = verdict.beacon.timestamp_ms - kNow;
    check(skew <= cairn::kBeaconWindowMs && skew >= -cairn::kBeaconWindowMs);
    check(checker.check(datagram, kNow).drop == cairn::BeaconDrop::kReplayed);
  }
  return 0;
}
