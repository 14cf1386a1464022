// Which of this machine's addresses and interfaces reach a destination, and whether a TCP
// connection to it can be made from here: the building blocks of a rendezvous across
// machines (issue 17 §7: MASTER_ADDR is an address every rank's machine can reach,
// GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME the interface that routes to rank 0).
//
// route_to asks the kernel's routing table without sending anything: a UDP socket connect()
// picks the route and the source address (getsockname), and getifaddrs names the interface
// that holds that address. probe_tcp makes a real, bounded TCP connection.
//
// The agent answers {"type": "probe", "host", "port"} with probe_reply (docs/peers.md):
// {"type": "probe", "reachable": bool, "local_address", "interface", "error"?}.
//
// Thread-safety: pure functions over their arguments (they use sockets of their own).
#pragma once

#include <chrono>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "peer/peer_address.h"

namespace cairn {

struct Route {
  std::string local_address;  // "192.168.1.7", "::1": this machine's source address
  std::string interface;      // "eth0", "lo"; "" when no interface holds the address
};

// The route to `host` (a name or an address; the port only matters for the kernel's
// choice where policy routing looks at it). kFailed with one line when `host` does not
// resolve or no route reaches it.
Result<Route> route_to(const std::string& host, uint16_t port = 9);

// Whether a TCP connection to `address` succeeds within `timeout` (closed at once).
// The error, when not, is connect_to's line.
Status probe_tcp(const PeerAddress& address, std::chrono::milliseconds timeout);

// The bound of an agent's probe: a probe takes its connection's thread this long at most.
inline constexpr std::chrono::milliseconds kProbeTimeout{2000};

// The agent's answer to a probe request (a host string of at most 255 bytes and a port
// 1..65535; anything else is answered with reachable false and the reason).
Json probe_reply(const Json& request);

}  // namespace cairn
