#include "peer/lan_interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

namespace cairn {

std::vector<LanInterface> lan_interfaces() {
  std::vector<LanInterface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
    if (!(it->ifa_flags & IFF_UP) || !(it->ifa_flags & IFF_RUNNING)) continue;
    LanInterface one;
    one.name = it->ifa_name ? it->ifa_name : "?";
    one.address = reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr;
    one.multicast = it->ifa_flags & IFF_MULTICAST;
    one.loopback = it->ifa_flags & IFF_LOOPBACK;
    if ((it->ifa_flags & IFF_BROADCAST) && it->ifa_broadaddr &&
        it->ifa_broadaddr->sa_family == AF_INET)
      one.broadcast = reinterpret_cast<const sockaddr_in*>(it->ifa_broadaddr)->sin_addr;
    // An address added without one (`ip addr add …` without `brd`) reads as 0.0.0.0 or as
    // the address itself: either would mean this machine, not the LAN.
    if (one.broadcast &&
        (one.broadcast->s_addr == 0 || one.broadcast->s_addr == one.address.s_addr))
      one.broadcast.reset();
    out.push_back(std::move(one));
  }
  ::freeifaddrs(list);
  return out;
}

std::string ipv4_text(in_addr address) {
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &address, text, sizeof text);
  return text;
}

}  // namespace cairn
