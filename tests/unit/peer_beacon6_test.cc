// IPv6 discovery (docs/peers.md "Discovery"): format 2 beacons, which name an IPv6 address,
// a receiver on IPv6 that adds the arrival interface to a link-local address, and an agent
// that announces over IPv6. The socket cases use IPv6 loopback ("[needs ipv6]": a machine
// may have IPv6 disabled).
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <net/if.h>
#include <sys/socket.h>

#include <future>
#include <mutex>
#include <vector>

#include "cairn_skip.h"
#include "common/file_util.h"
#include "peer/announcer.h"
#include "peer/beacon.h"
#include "peer/discovery.h"
#include "peer/peer_protocol.h"
#include "tests/unit/beacon_fixture.h"

namespace cairn {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;

using testing::hex_of;
using testing::key_of;

Beacon beacon6(const char* address, uint16_t port, int64_t timestamp, uint8_t nonce_byte) {
  Beacon b;
  b.protocol = kPeerProtocolVersion;
  b.family = BeaconFamily::kIpv6;
  ::inet_pton(AF_INET6, address, b.address6.data());
  b.port = port;
  b.timestamp_ms = timestamp;
  b.nonce.fill(nonce_byte);
  return b;
}

TEST_CASE("beacon6: format 2 names an IPv6 address, pinned as tests/e2e/beacon_forge.py") {
  const ClusterKey key = key_of('a');
  const std::string datagram = seal_beacon(beacon6("fe80::5", 7070, kNow, 7), key);
  CHECK(datagram.size() == kBeacon6Bytes);
  CHECK(hex_of(datagram) ==
        "43524e42020001fe8000000000000000000000000000051b9e3ba3f5f43b926026000001a3185c500007"
        "070707070707070707070707070707d4d512d46de83cd6df773fcce7b5bda30ce2d0605ab8de1b11b1b1"
        "486e012e05");
  BeaconChecker checker(key);
  auto verdict = checker.check(datagram, kNow);
  REQUIRE(verdict.accepted);
  CHECK(verdict.beacon.family == BeaconFamily::kIpv6);
  CHECK(verdict.beacon.address_text() == "[fe80::5]:7070");
  CHECK(verdict.beacon.key_id_hex() == key.id);
  CHECK(verdict.beacon.timestamp_ms == kNow);
  // Every field is under the HMAC, the address's 16 bytes included.
  for (size_t at : {5u, 7u, 22u, 23u, 25u, 33u, 41u, 88u}) {
    std::string changed = seal_beacon(beacon6("fe80::5", 7070, kNow, 9), key);
    changed[at] ^= 0x40;
    auto dropped = checker.check(changed, kNow);
    CHECK_FALSE(dropped.accepted);
    CHECK((dropped.drop == BeaconDrop::kForged || dropped.drop == BeaconDrop::kOtherKey));
  }
  // Replay, staleness and size checks as for format 1.
  CHECK(checker.check(datagram, kNow).drop == BeaconDrop::kReplayed);
  CHECK(checker.check(seal_beacon(beacon6("fe80::5", 7070, kNow - 60000, 8), key), kNow).drop ==
        BeaconDrop::kStale);
  for (size_t n : {size_t{5}, size_t{45}, kBeaconBytes, kBeacon6Bytes - 1, kBeacon6Bytes + 1})
    CHECK(checker
              .check(datagram.substr(0, std::min(n, datagram.size())) +
                         std::string(n > datagram.size() ? n - datagram.size() : 0, 'x'),
                     kNow)
              .drop == BeaconDrop::kMalformed);
  // A format 2 body claiming format 1 is the wrong size for it, and the reverse.
  std::string as1 = datagram;
  as1[4] = 1;
  CHECK(checker.check(as1, kNow).drop == BeaconDrop::kMalformed);
  std::string three = datagram;
  three[4] = 3;
  auto other = checker.check(three, kNow);
  CHECK(other.drop == BeaconDrop::kFormat);
  CHECK(other.detail.find("reads formats 1 and 2") != std::string::npos);
}

bool ipv6_loopback(std::string* why) {
  UniqueFd fd(::socket(AF_INET6, SOCK_DGRAM, 0));
  if (!fd) {
    *why = "no IPv6 sockets: " + errno_text();
    return false;
  }
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    *why = "cannot bind [::1]: " + errno_text();
    return false;
  }
  return true;
}

uint16_t free_udp6_port() {
  UniqueFd fd(::socket(AF_INET6, SOCK_DGRAM, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &n);
  return ntohs(a.sin6_port);
}

void send_udp6(uint16_t port, const std::string& datagram) {
  UniqueFd fd(::socket(AF_INET6, SOCK_DGRAM, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  a.sin6_port = htons(port);
  ::sendto(fd.get(), datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&a),
           sizeof a);
}

TEST_CASE(
    "discovery6: beacons over IPv6 propose peers, a link-local one with its scope "
    "[needs ipv6]") {
  std::string why;
  if (!ipv6_loopback(&why)) {
    CAIRN_SKIP("needs ipv6: " << why);
    return;
  }
  const ClusterKey key = key_of('a');
  const uint16_t port = free_udp6_port();
  std::promise<void> listening;
  std::vector<std::string> lines;
  DiscoveryOptions options;
  options.window = std::chrono::milliseconds(1500);
  options.beacon_port = port;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  options.listening = [&] { listening.set_value(); };
  auto result = std::async(std::launch::async, [&] { return discover_peers(key, options); });
  REQUIRE(listening.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const std::string link_local = seal_beacon(beacon6("fe80::5", 7071, unix_now_ms(), 1), key);
  send_udp6(port, link_local);
  send_udp6(port, link_local);  // replayed
  send_udp6(port, seal_beacon(beacon6("2001:db8::7", 7072, unix_now_ms(), 2), key));
  send_udp6(port, seal_beacon(beacon6("::", 7073, unix_now_ms(), 3), key));  // "from here"
  Beacon v4;  // a format 1 beacon over IPv6: the format names the address, not the transport
  v4.protocol = kPeerProtocolVersion;
  v4.address = {10, 0, 0, 9};
  v4.port = 7074;
  v4.timestamp_ms = unix_now_ms();
  v4.nonce.fill(4);
  send_udp6(port, seal_beacon(v4, key));
  std::string forged = seal_beacon(beacon6("fe80::6", 7075, unix_now_ms(), 5), key);
  forged[45] ^= 1;  // in the nonce
  send_udp6(port, forged);
  REQUIRE(result.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  auto found = result.get();
  REQUIRE(found.ok());
  REQUIRE(found->peers.size() == 4);
  // Link-local: usable only with the interface it was heard on (here loopback's).
  char lo[IF_NAMESIZE] = {};
  REQUIRE(::if_indextoname(::if_nametoindex("lo"), lo));
  // IPv4 first (an agent heard both ways is shown under its IPv4 address), then as heard.
  CHECK(found->peers[0].address.text() == "10.0.0.9:7074");
  CHECK(found->peers[1].address.text() == "[fe80::5%" + std::string(lo) + "]:7071");
  CHECK(found->peers[1].from.rfind("[::1]:", 0) == 0);
  CHECK(found->peers[1].via == "broadcast");  // unicast, as --announce-to's
  CHECK(found->peers[2].address.text() == "[2001:db8::7]:7072");
  CHECK(found->peers[3].address.text() == "[::1]:7073");
  CHECK(found->dropped[static_cast<int>(BeaconDrop::kReplayed)] == 1);
  CHECK(found->dropped[static_cast<int>(BeaconDrop::kForged)] == 1);
  bool named = false;
  for (const auto& line : lines)
    named = named || line.find("dropped a beacon from [::1]:") != std::string::npos;
  CHECK(named);
}

TEST_CASE("announcer6: an agent on [::1] announces format 2 beacons to [::1] [needs ipv6]") {
  std::string why;
  if (!ipv6_loopback(&why)) {
    CAIRN_SKIP("needs ipv6: " << why);
    return;
  }
  const ClusterKey key = key_of('a');
  const uint16_t port = free_udp6_port();
  UniqueFd fd(::socket(AF_INET6, SOCK_DGRAM, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  a.sin6_port = htons(port);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval wait{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  auto targets = parse_announce_targets("[::1]", port);
  REQUIRE(targets.ok());
  REQUIRE(targets->size() == 1);
  CHECK((*targets)[0].text() == "[::1]:" + std::to_string(port));  // the beacon port
  AnnounceOptions options;
  options.interval = std::chrono::milliseconds(100);
  options.agent_port = 4243;
  options.listen_host = "::1";
  options.to = *targets;
  std::vector<std::string> lines;
  std::mutex mutex;
  auto announcer = Announcer::start(key, options, [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(line);
  });
  REQUIRE(announcer.ok());
  BeaconChecker checker(key);
  for (int i = 0; i < 2; ++i) {
    char buffer[256];
    const ssize_t got = ::recv(fd.get(), buffer, sizeof buffer, 0);
    REQUIRE(got == static_cast<ssize_t>(kBeacon6Bytes));
    auto verdict = checker.check(std::string_view(buffer, got), unix_now_ms());
    REQUIRE(verdict.accepted);
    CHECK(verdict.beacon.address_text() == "[::1]:4243");
  }
  announcer->reset();
  std::lock_guard<std::mutex> lock(mutex);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("to [::1]:" + std::to_string(port) + " (as ::1)") != std::string::npos);
}

TEST_CASE("announcer6: --announce-to takes bracketed IPv6, a bare one meaning the beacon port") {
  auto list = parse_announce_targets("[::1]:9000, [2001:db8::1]", 7171);
  REQUIRE(list.ok());
  REQUIRE(list->size() == 2);
  CHECK((*list)[0].text() == "[::1]:9000");
  CHECK((*list)[1].text() == "[2001:db8::1]:7171");
  CHECK_FALSE(parse_announce_targets("::1", 7070).ok());  // brackets, as for --peers
}

}  // namespace
}  // namespace cairn
