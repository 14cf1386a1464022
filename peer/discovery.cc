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

std::string sender_text(const sockaddr_in& from) {
  return ipv4_text(from.sin_addr) + ":" + std::to_string(ntohs(from.sin_port));
}

}  // namespace

Result<Discovery> discover_peers(const ClusterKey& key, const DiscoveryOptions& options) {
  auto fd = beacon_socket(options.beacon_port, options.log);
  if (!fd.ok()) return fd.status();
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
    pollfd p{fd->get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) return Status::Io("poll: " + errno_text());
    if (ready <= 0) continue;
    for (;;) {
      sockaddr_in from{};
      iovec data{buffer, sizeof buffer};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in_pktinfo))];
      msghdr message{};
      message.msg_name = &from;
      message.msg_namelen = sizeof from;
      message.msg_iov = &data;
      message.msg_iovlen = 1;
      message.msg_control = control;
      message.msg_controllen = sizeof control;
      const ssize_t got = ::recvmsg(fd->get(), &message, MSG_TRUNC);
      if (got < 0) break;  // EAGAIN: read everything there was; other errors: try next poll
      bool multicast = false;
      for (cmsghdr* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c))
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
          in_pktinfo info{};
          std::memcpy(&info, CMSG_DATA(c), sizeof info);
          multicast = IN_MULTICAST(ntohl(info.ipi_addr.s_addr));
        }
      const std::string sender = sender_text(from);
      BeaconChecker::Verdict verdict;
      if (static_cast<size_t>(got) > sizeof buffer) {
        verdict.drop = BeaconDrop::kMalformed;
        verdict.detail = "datagram of " + std::to_string(got) + " bytes, a beacon has " +
                         std::to_string(kBeaconBytes);
      } else {
        verdict = checker.check(std::string_view(buffer, static_cast<size_t>(got)), unix_now_ms());
      }
      if (!verdict.accepted) {
        ++found.dropped[static_cast<int>(verdict.drop)];
        drops.dropped(verdict.drop, sender, verdict.detail);
        continue;
      }
      const Beacon& beacon = verdict.beacon;
      DiscoveredPeer peer;
      // A beacon that names no address means "where I sent from".
      in_addr named{};
      std::memcpy(&named.s_addr, beacon.address.data(), 4);
      if (named.s_addr == 0) named = from.sin_addr;
      peer.address.host = ipv4_text(named);
      peer.address.port = beacon.port;
      peer.protocol = beacon.protocol;
      peer.from = sender;
      peer.via = multicast ? "multicast" : "broadcast";
      auto known = std::find_if(found.peers.begin(), found.peers.end(), [&](const auto& p) {
        return p.address.host == peer.address.host && p.address.port == peer.address.port;
      });
      // An agent announces both ways each interval: heard by multicast once is "multicast".
      if (known == found.peers.end())
        found.peers.push_back(std::move(peer));
      else if (multicast)
        known->via = "multicast";
    }
  }
  drops.flush();
  return found;
}

}  // namespace cairn
