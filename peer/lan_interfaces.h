// The interfaces discovery uses (announcer.h sends on them, discovery.h listens on them):
// each IPv4 one that is up, with its address, whether it carries multicast, and its
// broadcast address; each IPv6 one that is up, with its index and addresses. Read afresh on
// each call, so interfaces that come and go are followed.
//
// Thread-safety: a pure function of the system's state.
#pragma once

#include <netinet/in.h>

#include <optional>
#include <string>
#include <vector>

namespace cairn {

struct LanInterface {
  std::string name;  // "eth0"
  in_addr address{};
  std::optional<in_addr> broadcast;
  bool multicast = false;
  bool loopback = false;
};

// Every IPv4 interface that is up (getifaddrs); empty when it fails.
std::vector<LanInterface> lan_interfaces();

struct LanInterface6 {
  std::string name;                  // "eth0"
  unsigned index = 0;                // the scope id of its link-local addresses
  std::vector<in6_addr> link_local;  // fe80::/10, in the order getifaddrs lists them
  std::vector<in6_addr> other;       // global, unique local (not loopback)
  bool multicast = false;
  bool loopback = false;
};

// Every interface that is up and has an IPv6 address (getifaddrs), one entry each with its
// usable addresses: not tentative (duplicate address detection under way) nor dadfailed
// (/proc/net/if_inet6 says which), so a beacon never names an address that does not answer
// yet. An interface whose addresses are all unusable is listed with none. Empty when
// getifaddrs fails or the machine has no IPv6.
std::vector<LanInterface6> lan_interfaces6();

// "10.0.0.5".
std::string ipv4_text(in_addr address);
// "fe80::1", and with a non-zero `scope` for a link-local address, "fe80::1%eth0" (the
// interface's name; its number when it has none any more).
std::string ipv6_text(const in6_addr& address, unsigned scope = 0);

}  // namespace cairn
