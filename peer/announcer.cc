#include "peer/announcer.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/file_util.h"
#include "peer/lan_interfaces.h"
#include "peer/peer_protocol.h"

namespace cairn {

namespace {

// One copy of a beacon: where it goes, through which interface, naming which address.
struct Destination {
  sockaddr_storage to{};
  socklen_t to_length = 0;
  std::optional<in_addr> via;  // IP_MULTICAST_IF, for the IPv4 multicast copies
  unsigned via6 = 0;           // IPV6_MULTICAST_IF, for the IPv6 multicast copies
  Beacon named;                // family and address: the agent's address the beacon carries
  std::string text;            // "multicast 239.255.70.70:7070 on eth0 (10.0.0.5)"
};

sockaddr_in ipv4_socket_address(in_addr address, uint16_t port) {
  sockaddr_in out{};
  out.sin_family = AF_INET;
  out.sin_addr = address;
  out.sin_port = htons(port);
  return out;
}

// A resolved host: its first address (IPv4 or IPv6, with the scope of a link-local one).
struct Resolved {
  sockaddr_storage address{};
  socklen_t length = 0;
  int family() const { return address.ss_family; }
  const in_addr& v4() const { return reinterpret_cast<const sockaddr_in*>(&address)->sin_addr; }
  const sockaddr_in6& v6() const { return *reinterpret_cast<const sockaddr_in6*>(&address); }
};

Result<Resolved> resolve_host(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || !found)
    return Status::BadInput("cannot resolve '" + host + "': " + (rc ? gai_strerror(rc) : "none"));
  Resolved out;
  for (addrinfo* a = found; a; a = a->ai_next)
    if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
        a->ai_addrlen <= sizeof out.address) {
      std::memcpy(&out.address, a->ai_addr, a->ai_addrlen);
      out.length = a->ai_addrlen;
      break;
    }
  ::freeaddrinfo(found);
  if (out.length == 0) return Status::BadInput("cannot resolve '" + host + "': no IP address");
  return out;
}

bool is_loopback(const Resolved& r) {
  if (r.family() == AF_INET) return (ntohl(r.v4().s_addr) >> 24) == 127;
  return IN6_IS_ADDR_LOOPBACK(&r.v6().sin6_addr);
}

bool is_any(const Resolved& r) {
  if (r.family() == AF_INET) return r.v4().s_addr == htonl(INADDR_ANY);
  return IN6_IS_ADDR_UNSPECIFIED(&r.v6().sin6_addr);
}

Beacon named_ipv4(in_addr address) {
  Beacon b;
  std::memcpy(b.address.data(), &address.s_addr, 4);
  return b;
}

Beacon named_ipv6(const in6_addr& address) {
  Beacon b;
  b.family = BeaconFamily::kIpv6;
  std::memcpy(b.address6.data(), address.s6_addr, 16);
  return b;
}

Beacon named_resolved(const Resolved& r) {
  return r.family() == AF_INET ? named_ipv4(r.v4()) : named_ipv6(r.v6().sin6_addr);
}

// The address this machine sends from to reach `to` (a connected UDP socket's name).
std::optional<Resolved> source_for(const Resolved& to) {
  UniqueFd fd(::socket(to.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return std::nullopt;
  int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_BROADCAST, &on, sizeof on);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to.address), to.length) != 0)
    return std::nullopt;
  Resolved local;
  local.length = sizeof local.address;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local.address), &local.length) != 0)
    return std::nullopt;
  return local;
}

std::string named_text(const Beacon& b) {
  return b.host_text();
}

std::string seconds_text(std::chrono::milliseconds interval) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(interval.count()) / 1000.0);
  return text;
}

}  // namespace

struct Announcer::Impl {
  ClusterKey key;
  AnnounceOptions options;
  std::function<void(const std::string&)> log;
  // When listening on one address: the beacons name it, and go out on its interface only.
  std::optional<Resolved> listen_address;
  bool listen_loopback = false;
  bool ipv4 = true, ipv6 = true;                        // the families the agent is reached at
  std::vector<std::pair<Resolved, std::string>> extra;  // resolved `to`, as written
  UniqueFd socket, socket6;                             // socket6 absent on a machine without IPv6
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;
  std::optional<std::string> last_summary;  // none before the first round
  std::set<std::string> failing;

  void ipv4_destinations(std::vector<Destination>& out) const {
    in_addr group{};
    ::inet_pton(AF_INET, kBeaconGroup, &group);
    for (const LanInterface& nic : lan_interfaces()) {
      if (nic.loopback && !nic.multicast) continue;
      if (listen_address && listen_address->v4().s_addr != nic.address.s_addr) continue;
      const std::string on = " on " + nic.name + " (" + ipv4_text(nic.address) + ")";
      if (nic.multicast) {
        Destination d;
        const sockaddr_in to = ipv4_socket_address(group, options.beacon_port);
        std::memcpy(&d.to, &to, sizeof to);
        d.to_length = sizeof to;
        d.via = nic.address;
        d.named = named_ipv4(nic.address);
        d.text = "multicast " + std::string(kBeaconGroup) + ":" +
                 std::to_string(options.beacon_port) + on;
        out.push_back(d);
      }
      if (nic.broadcast && !nic.loopback) {
        Destination d;
        const sockaddr_in to = ipv4_socket_address(*nic.broadcast, options.beacon_port);
        std::memcpy(&d.to, &to, sizeof to);
        d.to_length = sizeof to;
        d.named = named_ipv4(nic.address);
        d.text = "broadcast " + ipv4_text(*nic.broadcast) + ":" +
                 std::to_string(options.beacon_port) + on;
        out.push_back(d);
      }
    }
  }

  // The link-local group on each IPv6 interface with multicast, naming the interface's
  // link-local address (there on every IPv6 link, and not renumbered with the router's
  // prefix), else its first other address; or the one address the agent listens on.
  void ipv6_destinations(std::vector<Destination>& out) const {
    if (!socket6) return;
    in6_addr group{};
    ::inet_pton(AF_INET6, kBeaconGroup6, &group);
    for (const LanInterface6& nic : lan_interfaces6()) {
      if (!nic.multicast || nic.loopback) continue;
      std::optional<in6_addr> named;
      if (listen_address) {
        const sockaddr_in6& own = listen_address->v6();
        const bool link_local = IN6_IS_ADDR_LINKLOCAL(&own.sin6_addr);
        if (link_local && own.sin6_scope_id != 0 && own.sin6_scope_id != nic.index) continue;
        const auto& candidates = link_local ? nic.link_local : nic.other;
        for (const in6_addr& a : candidates)
          if (IN6_ARE_ADDR_EQUAL(&a, &own.sin6_addr)) named = a;
      } else if (!nic.link_local.empty()) {
        named = nic.link_local.front();
      } else if (!nic.other.empty()) {
        named = nic.other.front();
      }
      if (!named) continue;
      Destination d;
      sockaddr_in6 to{};
      to.sin6_family = AF_INET6;
      to.sin6_addr = group;
      to.sin6_port = htons(options.beacon_port);
      to.sin6_scope_id = nic.index;
      std::memcpy(&d.to, &to, sizeof to);
      d.to_length = sizeof to;
      d.via6 = nic.index;
      d.named = named_ipv6(*named);
      d.text = "multicast [" + std::string(kBeaconGroup6) +
               "]:" + std::to_string(options.beacon_port) + " on " + nic.name + " (" +
               ipv6_text(*named) + ")";
      out.push_back(d);
    }
  }

  std::vector<Destination> destinations() const {
    std::vector<Destination> out;
    if (options.lan && !listen_loopback) {
      if (ipv4) ipv4_destinations(out);
      if (ipv6) ipv6_destinations(out);
    }
    for (const auto& [to, written] : extra) {
      if (to.family() == AF_INET6 && !socket6) continue;
      Destination d;
      std::memcpy(&d.to, &to.address, to.length);
      d.to_length = to.length;
      auto source = listen_address ? listen_address : source_for(to);
      if (!source) continue;  // no route now; tried again next time
      // An agent reached at one family only never names the other (listening on 0.0.0.0).
      if ((source->family() == AF_INET && !ipv4) || (source->family() == AF_INET6 && !ipv6))
        continue;
      d.named = named_resolved(*source);
      d.text = written + " (as " + named_text(d.named) + ")";
      out.push_back(d);
    }
    return out;
  }

  void announce_once() {
    std::vector<Destination> all = destinations();
    std::string summary;
    for (const Destination& d : all) summary += (summary.empty() ? "" : ", ") + d.text;
    if (summary != last_summary) {
      last_summary = summary;
      log(summary.empty()
              ? std::string(listen_loopback ? "not announcing: this agent listens on loopback only "
                                              "(--announce-to names addresses to announce to)"
                                            : "not announcing: no interface with multicast or "
                                              "broadcast and a usable address is up")
              : "announcing every " + seconds_text(options.interval) + " s to " + summary +
                    " (key id " + key.id + ")");
    }
    for (const Destination& d : all) {
      Status sent = send(d);
      if (sent.ok()) {
        failing.erase(d.text);
      } else if (failing.insert(d.text).second) {
        log("cannot announce to " + d.text + ": " + sent.message());
      }
    }
  }

  Status send(const Destination& d) {
    const int fd = d.to.ss_family == AF_INET6 ? socket6.get() : socket.get();
    if (d.via) {
      ip_mreqn request{};
      request.imr_address = *d.via;
      if (::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &request, sizeof request) != 0)
        return Status::Io("IP_MULTICAST_IF: " + errno_text());
    }
    if (d.via6 != 0) {
      const int index = static_cast<int>(d.via6);
      if (::setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &index, sizeof index) != 0)
        return Status::Io("IPV6_MULTICAST_IF: " + errno_text());
    }
    auto beacon = new_beacon(key, {}, options.agent_port, kPeerProtocolVersion, unix_now_ms());
    if (!beacon.ok()) return beacon.status();
    beacon->family = d.named.family;
    beacon->address = d.named.address;
    beacon->address6 = d.named.address6;
    const std::string datagram = seal_beacon(*beacon, key);
    if (::sendto(fd, datagram.data(), datagram.size(), MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&d.to), d.to_length) < 0)
      return Status::Io(errno_text());
    return Status::Ok();
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      if (wake.wait_for(lock, options.interval, [this] { return stopping; })) return;
      lock.unlock();
      announce_once();
      lock.lock();
    }
  }
};

Result<std::vector<PeerAddress>> parse_announce_targets(const std::string& text,
                                                        uint16_t beacon_port) {
  std::vector<PeerAddress> out;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, comma - start);
    start = comma + 1;
    const size_t first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
    auto one = parse_peer_address(item);
    if (!one.ok()) return one.status();
    // parse_peer_address would give a bare host the agent's port, not the beacons'.
    const bool port_written = item.front() == '[' ? item.find("]:") != std::string::npos
                                                  : item.find(':') != std::string::npos;
    if (!port_written) one->port = beacon_port;
    auto address = resolve_host(one->host, one->port);
    if (!address.ok())
      return Status::BadInput("--announce-to " + item + ": " + address.status().message());
    out.push_back(*one);
  }
  return out;
}

Announcer::Announcer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Announcer::~Announcer() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::unique_ptr<Announcer>> Announcer::start(ClusterKey key, AnnounceOptions options,
                                                    std::function<void(const std::string&)> log) {
  auto impl = std::make_unique<Impl>();
  impl->key = std::move(key);
  impl->log = log ? std::move(log) : [](const std::string&) {};
  if (!options.listen_host.empty()) {
    auto address = resolve_host(options.listen_host, options.agent_port);
    if (!address.ok()) return address.status();
    // 0.0.0.0: every IPv4 interface; "::" (dual-stack, peer_address.h): every interface.
    if (is_any(*address)) {
      impl->ipv6 = address->family() == AF_INET6;
    } else {
      impl->listen_address = *address;
      impl->listen_loopback = is_loopback(*address);
      impl->ipv4 = address->family() == AF_INET;
      impl->ipv6 = !impl->ipv4;
    }
  }
  for (const PeerAddress& to : options.to) {
    auto address = resolve_host(to.host, to.port);
    if (!address.ok()) return address.status();
    impl->extra.emplace_back(*address, to.text());
  }
  impl->options = std::move(options);
  impl->socket.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!impl->socket) return Status::Io("cannot open a UDP socket for beacons: " + errno_text());
  int on = 1;
  ::setsockopt(impl->socket.get(), SOL_SOCKET, SO_BROADCAST, &on, sizeof on);
  // The LAN only: a beacon never crosses a router (administratively scoped group, TTL 1).
  unsigned char ttl = 1, loop = 1;
  ::setsockopt(impl->socket.get(), IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
  // Looped back, so `cairn peers` on this machine finds the agents that run here.
  ::setsockopt(impl->socket.get(), IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop);
  // IPv6 where the machine has it (the group is link-local: hop limit 1 as well).
  impl->socket6.reset(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (impl->socket6) {
    const int hops = 1, loop6 = 1;
    ::setsockopt(impl->socket6.get(), IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof hops);
    ::setsockopt(impl->socket6.get(), IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &loop6, sizeof loop6);
  }
  impl->announce_once();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    // Signals are the main thread's (SignalPipe): none interrupts a send here.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    raw->run();
  });
  return std::unique_ptr<Announcer>(new Announcer(std::move(impl)));
}

}  // namespace cairn
