#include "peer/route_probe.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "common/file_util.h"

namespace cairn {

namespace {

std::string address_text(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof text);
  return text;
}

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (!a || !b || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return std::memcmp(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr,
                       &reinterpret_cast<const sockaddr_in*>(b)->sin_addr, sizeof(in_addr)) == 0;
  if (a->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

// The interface that holds `address`, "" when none does.
std::string interface_of(const sockaddr* address) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (same_address(i->ifa_addr, address)) {
      name = i->ifa_name;
      break;
    }
  }
  ::freeifaddrs(list);
  return name;
}

}  // namespace

Result<Route> route_to(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) return Status::Failed("cannot resolve " + host + ": " + ::gai_strerror(rc));
  std::string last = "no address";
  for (addrinfo* a = found; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd) continue;
    // connect() on a datagram socket sends nothing: the kernel only picks the route.
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      last = errno_text();
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      last = errno_text();
      continue;
    }
    Route route;
    route.local_address = address_text(reinterpret_cast<sockaddr*>(&local));
    route.interface = interface_of(reinterpret_cast<sockaddr*>(&local));
    ::freeaddrinfo(found);
    return route;
  }
  ::freeaddrinfo(found);
  return Status::Failed("no route to " + host + ": " + last);
}

Status probe_tcp(const PeerAddress& address, std::chrono::milliseconds timeout) {
  auto fd = connect_to(address, std::chrono::steady_clock::now() + timeout);
  if (!fd.ok()) return fd.status();
  return Status::Ok();
}

Json probe_reply(const Json& request) {
  Json reply{
      {"type", "probe"}, {"reachable", false}, {"local_address", nullptr}, {"interface", nullptr}};
  const Json host = request.value("host", Json());
  const Json port = request.value("port", Json());
  if (!host.is_string() || host.get<std::string>().empty() ||
      host.get<std::string>().size() > 255 || !port.is_number_integer() ||
      port.get<int64_t>() < 1 || port.get<int64_t>() > 65535) {
    reply["error"] = "a probe needs a host (a string) and a port (1..65535)";
    return reply;
  }
  const std::string h = host.get<std::string>();
  const auto p = static_cast<uint16_t>(port.get<int64_t>());
  auto route = route_to(h, p);
  if (route.ok()) {
    reply["local_address"] = route->local_address;
    reply["interface"] = route->interface;
  }
  Status reached = probe_tcp(PeerAddress{h, p}, kProbeTimeout);
  reply["reachable"] = reached.ok();
  if (!reached.ok())
    reply["error"] = reached.message();
  else if (!route.ok())
    reply["error"] = route.status().message();
  return reply;
}

}  // namespace cairn
