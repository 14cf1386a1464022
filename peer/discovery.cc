#include "peer/discovery.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/file_util.h"
#include "peer/beacon_drop_log.h"
#include "peer/lan_interfaces.h"

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

// Bigger than any beacon, so an oversized datagram is seen as such (MSG_TRUNC gives its
// real length) and never read past this buffer.
constexpr size_t kReceiveBytes = 512;

Result<UniqueFd> beacon_socket(uint16_t port, const std::function<void(const std::string&)>& log) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Status::Io("cannot open a UDP socket for beacons: " + errno_text());
  int on = 1;
  // Several listeners on one machine (two `cairn peers` at once) each get every multicast
  // and broadcast datagram.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  // Each datagram's destination, so a peer says whether it was heard by multicast or by
  // broadcast (SPEC: `cairn peers --json`'s found_by).
  ::setsockopt(fd.get(), IPPROTO_IP, IP_PKTINFO, &on, sizeof on);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = htons(port);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0)
    return Status::Io("cannot listen for beacons on UDP port " + std::to_string(port) + ": " +
                      errno_text());
  in_addr group{};
  ::inet_pton(AF_INET, kBeaconGroup, &group);
  int joined = 0;
  for (const LanInterface& nic : lan_interfaces()) {
    if (!nic.multicast) continue;
    ip_mreqn request{};
    request.imr_multiaddr = group;
    request.imr_address = nic.address;
    if (::setsockopt(fd.get(), IPPROTO_IP, IP_ADD_MEMBERSHIP, &request, sizeof request) == 0 ||
        errno == EADDRINUSE)
      ++joined;
  }
  if (joined == 0 && log)
    log(std::string(
            "no interface carries multicast: listening for broadcast beacons only (group ") +
        kBeaconGroup + ")");
  return fd;
}

// The IPv6 listener, where the machine has IPv6: the link-local group joined on every IPv6
// interface with multicast. Absent (no error) when the machine has no IPv6.
Result<UniqueFd> beacon_socket6(uint16_t port) {
  UniqueFd fd(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    if (errno == EAFNOSUPPORT) return UniqueFd();
    return Status::Io("cannot open an IPv6 UDP socket for beacons: " + errno_text());
  }
  int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  // IPv4 beacons come to the IPv4 socket, with their IP_PKTINFO.
  ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
  // The destination (multicast or not) and the arrival interface: a link-local address
  // is only usable with the scope of the interface it was heard on.
  ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  any.sin6_port = htons(port);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0) {
    if (errno == EADDRNOTAVAIL) return UniqueFd();  // IPv6 disabled on this machine
    return Status::Io("cannot listen for IPv6 beacons on UDP port " + std::to_string(port) + ": " +
                      errno_text());
  }
  ipv6_mreq request{};
  ::inet_pton(AF_INET6, kBeaconGroup6, &request.ipv6mr_multiaddr);
  for (const LanInterface6& nic : lan_interfaces6()) {
    if (!nic.multicast) continue;
    request.ipv6mr_interface = nic.index;
    (void)::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_JOIN_GROUP, &request, sizeof request);
  }
  return fd;
}

std::string sender_text(const sockaddr_storage& from) {
  if (from.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(from);
    return "[" + ipv6_text(in6.sin6_addr, in6.sin6_scope_id) +
           "]:" + std::to_string(ntohs(in6.sin6_port));
  }
  const auto& in = reinterpret_cast<const sockaddr_in&>(from);
  return ipv4_text(in.sin_addr) + ":" + std::to_string(ntohs(in.sin_port));
}

// One datagram as read: its bytes' size, where it came from, whether it came to a group,
// and (IPv6) the interface it arrived on.
struct Arrival {
  ssize_t size = -1;
  sockaddr_storage from{};
  bool multicast = false;
  unsigned interface = 0;
};

Arrival receive_one(int fd, char* buffer, size_t capacity) {
  Arrival got;
  iovec data{buffer, capacity};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(in_pktinfo))];
  msghdr message{};
  message.msg_name = &got.from;
  message.msg_namelen = sizeof got.from;
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  got.size = ::recvmsg(fd, &message, MSG_TRUNC);
  if (got.size < 0) return got;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo info{};
      std::memcpy(&info, CMSG_DATA(c), sizeof info);
      got.multicast = IN_MULTICAST(ntohl(info.ipi_addr.s_addr));
    }
    if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo info{};
      std::memcpy(&info, CMSG_DATA(c), sizeof info);
      got.multicast = IN6_IS_ADDR_MULTICAST(&info.ipi6_addr);
      got.interface = info.ipi6_ifindex;
    }
  }
  return got;
}

// The host a beacon proposes: the address it names (a link-local IPv6 one with the scope of
// the interface it arrived on), or where it came from when it names none.
std::string proposed_host(const Beacon& beacon, const Arrival& got) {
  if (beacon.unspecified()) {
    if (got.from.ss_family == AF_INET6) {
      const auto& in6 = reinterpret_cast<const sockaddr_in6&>(got.from);
      return ipv6_text(in6.sin6_addr, in6.sin6_scope_id ? in6.sin6_scope_id : got.interface);
    }
    return ipv4_text(reinterpret_cast<const sockaddr_in&>(got.from).sin_addr);
  }
  if (beacon.family == BeaconFamily::kIpv6) {
    in6_addr named{};
    std::memcpy(named.s6_addr, beacon.address6.data(), 16);
    unsigned scope = got.interface;
    if (scope == 0 && got.from.ss_family == AF_INET6)
      scope = reinterpret_cast<const sockaddr_in6&>(got.from).sin6_scope_id;
    return ipv6_text(named, scope);
  }
  return beacon.host_text();
}

}  // namespace

Result<Discovery> discover_peers(const ClusterKey& key, const DiscoveryOptions& options) {
  auto fd = beacon_socket(options.beacon_port, options.log);
  if (!fd.ok()) return fd.status();
  auto fd6 = beacon_socket6(options.beacon_port);
  if (!fd6.ok()) {
    // IPv4 discovery still works: say so once, and go on.
    if (options.log) options.log(fd6.status().message() + ": listening for IPv4 beacons only");
    fd6 = UniqueFd();
  }
  if (options.listening) options.listening();
  BeaconChecker checker(key);
  BeaconDropLog drops(options.log, options.log_interval);
  Discovery found;
  const auto deadline = Clock::now() + options.window;
  char buffer[kReceiveBytes];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p[2] = {{fd->get(), POLLIN, 0}, {fd6->get(), POLLIN, 0}};
    const nfds_t count = *fd6 ? 2 : 1;
    const int ready = ::poll(p, count, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) return Status::Io("poll: " + errno_text());
    if (ready <= 0) continue;
    for (nfds_t i = 0; i < count; ++i) {
      if (!(p[i].revents & POLLIN)) continue;
      for (;;) {
        const Arrival got = receive_one(p[i].fd, buffer, sizeof buffer);
        if (got.size < 0) break;  // EAGAIN: read everything there was; others: next poll
        const std::string sender = sender_text(got.from);
        BeaconChecker::Verdict verdict;
        if (static_cast<size_t>(got.size) > sizeof buffer) {
          verdict.drop = BeaconDrop::kMalformed;
          verdict.detail = "datagram of " + std::to_string(got.size) + " bytes, a beacon has " +
                           std::to_string(kBeaconBytes) + " or " + std::to_string(kBeacon6Bytes);
        } else {
          verdict =
              checker.check(std::string_view(buffer, static_cast<size_t>(got.size)), unix_now_ms());
        }
        if (!verdict.accepted) {
          ++found.dropped[static_cast<int>(verdict.drop)];
          drops.dropped(verdict.drop, sender, verdict.detail);
          continue;
        }
        DiscoveredPeer peer;
        peer.address.host = proposed_host(verdict.beacon, got);
        peer.address.port = verdict.beacon.port;
        peer.protocol = verdict.beacon.protocol;
        peer.from = sender;
        peer.via = got.multicast ? "multicast" : "broadcast";
        auto known = std::find_if(found.peers.begin(), found.peers.end(), [&](const auto& p) {
          return p.address.host == peer.address.host && p.address.port == peer.address.port;
        });
        // An agent announces both ways each interval: heard by multicast once is "multicast".
        if (known == found.peers.end())
          found.peers.push_back(std::move(peer));
        else if (got.multicast)
          known->via = "multicast";
      }
    }
  }
  drops.flush();
  // IPv4 first: an agent heard both ways (a dual-stack LAN) is then shown, and used, under
  // its IPv4 address (`cairn peers` keeps the first address of each agent).
  std::stable_partition(found.peers.begin(), found.peers.end(), [](const DiscoveredPeer& p) {
    return p.address.host.find(':') == std::string::npos;
  });
  return found;
}

}  // namespace cairn
