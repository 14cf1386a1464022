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
  sockaddr_in to{};
  std::optional<in_addr> via;  // IP_MULTICAST_IF, for the multicast copies
  in_addr named{};             // the agent's address the beacon carries
  std::string text;            // "multicast 239.255.70.70:7070 on eth0 (10.0.0.5)"
};

sockaddr_in ipv4_socket_address(in_addr address, uint16_t port) {
  sockaddr_in out{};
  out.sin_family = AF_INET;
  out.sin_addr = address;
  out.sin_port = htons(port);
  return out;
}

Result<in_addr> resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || !found)
    return Status::BadInput("cannot resolve '" + host +
                            "' to an IPv4 address: " + (rc ? gai_strerror(rc) : "none"));
  in_addr out = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return out;
}

// The address this machine sends from to reach `to` (a connected UDP socket's name).
std::optional<in_addr> source_for(const sockaddr_in& to) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return std::nullopt;
  int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_BROADCAST, &on, sizeof on);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0)
    return std::nullopt;
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0)
    return std::nullopt;
  return local.sin_addr;
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
  std::optional<in_addr> listen_address;  // when listening on one address
  bool listen_loopback = false;
  std::vector<std::pair<sockaddr_in, std::string>> extra;  // resolved `to`, as written
  UniqueFd socket;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;
  std::optional<std::string> last_summary;  // none before the first round
  std::set<std::string> failing;

  std::vector<Destination> destinations() const {
    std::vector<Destination> out;
    in_addr group{};
    ::inet_pton(AF_INET, kBeaconGroup, &group);
    if (options.lan && !listen_loopback) {
      for (const LanInterface& nic : lan_interfaces()) {
        if (nic.loopback && !nic.multicast) continue;
        if (listen_address && listen_address->s_addr != nic.address.s_addr) continue;
        const std::string on = " on " + nic.name + " (" + ipv4_text(nic.address) + ")";
        if (nic.multicast) {
          Destination d;
          d.to = ipv4_socket_address(group, options.beacon_port);
          d.via = nic.address;
          d.named = nic.address;
          d.text = "multicast " + std::string(kBeaconGroup) + ":" +
                   std::to_string(options.beacon_port) + on;
          out.push_back(d);
        }
        if (nic.broadcast && !nic.loopback) {
          Destination d;
          d.to = ipv4_socket_address(*nic.broadcast, options.beacon_port);
          d.named = nic.address;
          d.text = "broadcast " + ipv4_text(*nic.broadcast) + ":" +
                   std::to_string(options.beacon_port) + on;
          out.push_back(d);
        }
      }
    }
    for (const auto& [to, written] : extra) {
      Destination d;
      d.to = to;
      auto source = listen_address ? listen_address : source_for(to);
      if (!source) continue;  // no route now; tried again next time
      d.named = *source;
      d.text = written + " (as " + ipv4_text(*source) + ")";
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
                                            : "not announcing: no IPv4 interface with multicast or "
                                              "broadcast is up")
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
    if (d.via) {
      ip_mreqn request{};
      request.imr_address = *d.via;
      if (::setsockopt(socket.get(), IPPROTO_IP, IP_MULTICAST_IF, &request, sizeof request) != 0)
        return Status::Io("IP_MULTICAST_IF: " + errno_text());
    }
    auto beacon = new_beacon(key, {}, options.agent_port, kPeerProtocolVersion, unix_now_ms());
    if (!beacon.ok()) return beacon.status();
    std::memcpy(beacon->address.data(), &d.named.s_addr, 4);
    const std::string datagram = seal_beacon(*beacon, key);
    if (::sendto(socket.get(), datagram.data(), datagram.size(), MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&d.to), sizeof d.to) < 0)
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
    if (item.find(':') == std::string::npos) one->port = beacon_port;
    auto address = resolve_ipv4(one->host);
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
    auto address = resolve_ipv4(options.listen_host);
    if (!address.ok()) return address.status();
    impl->listen_address = *address;
    impl->listen_loopback = (ntohl(address->s_addr) >> 24) == 127;
  }
  for (const PeerAddress& to : options.to) {
    auto address = resolve_ipv4(to.host);
    if (!address.ok()) return address.status();
    impl->extra.emplace_back(ipv4_socket_address(*address, to.port), to.text());
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
