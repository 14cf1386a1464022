// The receiving side of discovery (docs/peers.md, "Discovery"): listen for agents' beacons
// (beacon.h) for a window and return the peers they propose. A proposed peer is not usable
// yet: the caller connects to it with the cluster key (agent_client.h's query_agent_status
// or connect_to_agent), which is what authenticates it; a beacon only says where to try.
// `cairn peers` (no --peers, or "auto" in the list) uses it; so can `cairn run --peers auto`.
//
// Thread-safety: discover_peers() uses only its arguments; run several at once if needed
// (each has its own socket; SO_REUSEADDR lets them share the port).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "peer/beacon.h"
#include "peer/cluster_key.h"
#include "peer/peer_address.h"

namespace cairn {

struct DiscoveryOptions {
  std::chrono::milliseconds window{3000};
  uint16_t beacon_port = kDefaultBeaconPort;
  // One line per dropped-beacon cause per `log_interval` at most (beacon_drop_log.h); also
  // told when no interface could join the multicast group. May be empty.
  std::function<void(const std::string&)> log;
  std::chrono::milliseconds log_interval{10000};
  // For tests: called once the socket listens, before the window starts counting.
  std::function<void()> listening;
};

struct DiscoveredPeer {
  // The numeric address the beacon names ("10.0.0.5"; "fe80::1%eth0": a link-local IPv6
  // address with the interface it was heard on) and the agent's TCP port.
  PeerAddress address;
  uint16_t protocol = 0;  // the peer protocol version the beacon claims (the hello decides)
  std::string
      from;  // where the first accepted beacon came from ("10.0.0.5:40211", "[fe80::1%eth0]:40211")
  // How its beacons came: "multicast" when any came to the group, else "broadcast" (to a
  // broadcast address, or to this host's own with --announce-to): `cairn peers`' found_by.
  std::string via = "broadcast";
};

// What one window saw: the proposed peers, in the order first heard, each once, and how many
// datagrams were dropped for each cause.
struct Discovery {
  std::vector<DiscoveredPeer> peers;
  std::array<int, kBeaconDropKinds> dropped{};
};

// Listens on UDP `options.beacon_port` (every IPv4 and, where the machine has IPv6, every
// IPv6 address; the IPv4 group and the IPv6 link-local group joined on every interface that
// carries multicast) for `options.window` and checks every datagram with a
// BeaconChecker of `key`. kIo when the socket cannot be bound. Without a key (key.none())
// nothing is ever accepted: beacons of keyed agents count as "other key".
Result<Discovery> discover_peers(const ClusterKey& key, const DiscoveryOptions& options);

}  // namespace cairn
