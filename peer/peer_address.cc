#include "peer/peer_address.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoDeleter>;

Result<AddrInfoList> resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : AI_ADDRCONFIG;
  if (passive && host.empty()) hints.ai_family = AF_INET6;  // dual-stack below
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) return Status::BadInput("cannot resolve '" + host + "': " + gai_strerror(rc));
  return AddrInfoList(found);
}

// "%eth0" for a link-local address (usable only with its interface), else "".
std::string scope_suffix(const sockaddr_in6& in6) {
  if (!IN6_IS_ADDR_LINKLOCAL(&in6.sin6_addr) || in6.sin6_scope_id == 0) return "";
  char name[IF_NAMESIZE] = {};
  return "%" + (::if_indextoname(in6.sin6_scope_id, name) ? std::string(name)
                                                          : std::to_string(in6.sin6_scope_id));
}

// The numeric host of an address, without port or brackets ("10.0.0.2", "fe80::1%eth0").
std::string sockaddr_host(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, host, sizeof host);
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof host);
    else
      return inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host) ? host + scope_suffix(*in6)
                                                                     : "?";
  }
  return host;
}

std::string sockaddr_name(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof host);
      return std::string(host) + ":" + std::to_string(ntohs(in6->sin6_port));
    }
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + scope_suffix(*in6) +
           "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "?";
}

bool sockaddr_is_loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace

std::string PeerAddress::text() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<PeerAddress> parse_peer_address(const std::string& text) {
  PeerAddress address;
  std::string port_text;
  auto bad = [&](const std::string& why) {
    return Status::BadInput("bad peer address '" + text + "': " + why +
                            " (expected HOST:PORT, HOST, or [IPv6]:PORT)");
  };
  if (text.empty()) return bad("empty");
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return bad("no closing ']'");
    address.host = text.substr(1, close - 1);
    const std::string rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("text after ']'");
      port_text = rest.substr(1);
      if (port_text.empty()) return bad("no port after ':'");
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') != colon)
      return bad("an IPv6 address needs brackets");
    if (colon == std::string::npos) {
      address.host = text;
    } else {
      address.host = text.substr(0, colon);
      port_text = text.substr(colon + 1);
      if (port_text.empty()) return bad("no port after ':'");
    }
  }
  for (char c : address.host)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '/' || c == '[' || c == ']')
      return bad("the host has a character no host name has");
  if (!port_text.empty()) {
    if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos)
      return bad("the port is not a number");
    const int port = std::stoi(port_text);
    // 0 is for listening: the system picks a free port, which the agent logs.
    if (port > 65535) return bad("the port is not in 0..65535");
    address.port = static_cast<uint16_t>(port);
  }
  return address;
}

Result<std::vector<PeerAddress>> parse_peer_list(const std::string& text) {
  std::vector<PeerAddress> list;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())))
      item.erase(0, 1);
    if (!item.empty()) {
      auto address = parse_peer_address(item);
      if (!address.ok()) return address.status();
      list.push_back(*address);
    }
    start = comma + 1;
  }
  return list;
}

Result<bool> is_loopback_host(const std::string& host) {
  if (host.empty()) return false;
  auto list = resolve(host, kDefaultAgentPort, /*passive=*/true);
  if (!list.ok()) return list.status();
  for (addrinfo* a = list->get(); a; a = a->ai_next)
    if (!sockaddr_is_loopback(a->ai_addr)) return false;
  return true;
}

Result<UniqueFd> listen_on(const PeerAddress& address, int backlog) {
  auto list = resolve(address.host, address.port, /*passive=*/true);
  if (!list.ok()) return list.status();
  std::string last_error = "no address";
  if (address.host.empty()) {
    // Every address: IPv6 with IPv4 mapped in; a machine without IPv6 gets IPv4's.
    auto any4 = [&]() -> Result<UniqueFd> {
      UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      sockaddr_in in{};
      in.sin_family = AF_INET;
      in.sin_port = htons(address.port);
      in.sin_addr.s_addr = htonl(INADDR_ANY);
      const int one = 1;
      if (fd) ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&in), sizeof in) != 0 ||
          ::listen(fd.get(), backlog) != 0)
        return Status::Failed("cannot listen on " + address.text() + ": " + errno_text());
      return fd;
    };
    UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd && (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT)) return any4();
  }
  for (addrinfo* a = list->get(); a; a = a->ai_next) {
    UniqueFd fd(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      last_error = errno_text();
      continue;
    }
    const int one = 1, zero = 0;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // "" and "::" both mean every address, IPv4 (mapped) included, whatever
    // net.ipv6.bindv6only says.
    if (a->ai_family == AF_INET6 && (address.host.empty() || address.host == "::"))
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      last_error = errno_text();
      continue;
    }
    return fd;
  }
  return Status::Failed("cannot listen on " + address.text() + ": " + last_error);
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

Result<UniqueFd> connect_to(const PeerAddress& address, Clock::time_point deadline) {
  auto list = resolve(address.host, address.port, /*passive=*/false);
  if (!list.ok())
    return Status::Failed("cannot connect to " + address.text() + ": " + list.status().message());
  std::string last_error = "no address";
  for (addrinfo* a = list->get(); a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd) {
      last_error = errno_text();
      continue;
    }
    set_nonblocking(fd.get());
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) return fd;
    if (errno != EINPROGRESS) {
      last_error = errno_text();
      continue;
    }
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        last_error = "timed out";
        break;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;
      int error = 0;
      socklen_t len = sizeof error;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
      if (error == 0) return fd;
      last_error = std::strerror(error);
      break;
    }
    if (last_error == "timed out") break;
  }
  return Status::Failed("cannot connect to " + address.text() + ": " + last_error);
}

std::string remote_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_name(reinterpret_cast<sockaddr*>(&ss));
}

std::string local_host(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return sockaddr_host(reinterpret_cast<sockaddr*>(&ss));
}

std::string remote_host(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return sockaddr_host(reinterpret_cast<sockaddr*>(&ss));
}

}  // namespace cairn
