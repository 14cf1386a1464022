// The IPv4 interfaces discovery uses (announcer.h sends on them, discovery.h listens on
// them): each one that is up, with its address, whether it carries multicast, and its
// broadcast address. Read afresh on each call, so interfaces that come and go are followed.
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

// "10.0.0.5".
std::string ipv4_text(in_addr address);

}  // namespace cairn
