#include "peer/lan_interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/if_addr.h>
#include <net/if.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

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

namespace {

// The IPv6 addresses that cannot be used yet or at all: tentative (duplicate address
// detection still running: packets to it are dropped) or dadfailed. getifaddrs does not say;
// /proc/net/if_inet6 does ("ADDRESS32HEX IFINDEX PREFIXLEN SCOPE FLAGS NAME", flags in hex).
// Empty when it cannot be read (then nothing is left out).
std::vector<in6_addr> unusable_ipv6() {
  std::vector<in6_addr> out;
  std::ifstream in("/proc/net/if_inet6");
  std::string hex, index, prefix, scope, flags, name;
  while (in >> hex >> index >> prefix >> scope >> flags >> name) {
    const unsigned long bits = std::strtoul(flags.c_str(), nullptr, 16);
    if (hex.size() != 32 || !(bits & (IFA_F_TENTATIVE | IFA_F_DADFAILED))) continue;
    in6_addr address{};
    for (size_t i = 0; i < 16; ++i)
      address.s6_addr[i] =
          static_cast<uint8_t>(std::strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
    out.push_back(address);
  }
  return out;
}

}  // namespace

std::vector<LanInterface6> lan_interfaces6() {
  std::vector<LanInterface6> out;
  const std::vector<in6_addr> unusable = unusable_ipv6();
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET6 || !it->ifa_name) continue;
    if (!(it->ifa_flags & IFF_UP) || !(it->ifa_flags & IFF_RUNNING)) continue;
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
    auto one = std::find_if(out.begin(), out.end(),
                            [&](const LanInterface6& nic) { return nic.name == it->ifa_name; });
    if (one == out.end()) {
      LanInterface6 nic;
      nic.name = it->ifa_name;
      nic.index = ::if_nametoindex(it->ifa_name);
      nic.multicast = it->ifa_flags & IFF_MULTICAST;
      nic.loopback = it->ifa_flags & IFF_LOOPBACK;
      if (nic.index == 0) continue;  // gone meanwhile
      out.push_back(std::move(nic));
      one = out.end() - 1;
    }
    if (std::any_of(unusable.begin(), unusable.end(),
                    [&](const in6_addr& a) { return IN6_ARE_ADDR_EQUAL(&a, &in6->sin6_addr); }))
      continue;
    if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr))
      one->link_local.push_back(in6->sin6_addr);
    else if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) && !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
      one->other.push_back(in6->sin6_addr);
  }
  ::freeifaddrs(list);
  return out;
}

std::string ipv6_text(const in6_addr& address, unsigned scope) {
  char text[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET6, &address, text, sizeof text);
  std::string out = text;
  if (scope != 0 && IN6_IS_ADDR_LINKLOCAL(&address)) {
    char name[IF_NAMESIZE] = {};
    out += "%";
    out += ::if_indextoname(scope, name) ? std::string(name) : std::to_string(scope);
  }
  return out;
}

std::string ipv4_text(in_addr address) {
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &address, text, sizeof text);
  return text;
}

}  // namespace cairn
