#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "peer/announcer.h"
#include "peer/beacon.h"
#include "peer/beacon_drop_log.h"
#include "peer/discovery.h"
#include "peer/peer_protocol.h"
#include "tests/unit/beacon_fixture.h"

namespace cairn {
namespace {

using testing::hex_of;
using testing::key_of;

constexpr int64_t kNow = 1'800'000'000'000;

std::string sealed(const ClusterKey& key, int64_t timestamp, uint8_t nonce_byte = 7,
                   uint16_t port = 7070) {
  Beacon b;
  b.protocol = kPeerProtocolVersion;
  b.address = {10, 0, 0, 5};
  b.port = port;
  b.timestamp_ms = timestamp;
  b.nonce.fill(nonce_byte);
  return seal_beacon(b, key);
}

TEST_CASE("beacon: a sealed beacon checks, with every field as sent") {
  const ClusterKey key = key_of('a');
  const std::string datagram = sealed(key, kNow);
  CHECK(datagram.size() == kBeaconBytes);
  BeaconChecker checker(key);
  auto verdict = checker.check(datagram, kNow);
  REQUIRE(verdict.accepted);
  CHECK(verdict.beacon.address_text() == "10.0.0.5:7070");
  CHECK(verdict.beacon.protocol == kPeerProtocolVersion);
  CHECK(verdict.beacon.key_id_hex() == key.id);
  CHECK(verdict.beacon.timestamp_ms == kNow);
}

TEST_CASE("beacon: the layout and the subkey are pinned (docs/peers.md, tests/e2e)") {
  // The same bytes as tests/e2e/beacon_forge.py computes with Python's hmac module: a
  // change of either is a change of the wire format.
  const ClusterKey key = key_of('a');
  CHECK(hex_of(beacon_subkey(key)) ==
        "482c473aca8785a335b6bcccb1e0854c2aa8b64408009d446016afd97583c150");
  CHECK(hex_of(sealed(key, kNow)) ==
        "43524e420100010a0000051b9e3ba3f5f43b926026000001a3185c5000070707070707070707070707070707"
        "072d8cc44f451a9ec973b5cca3148451217d003a71bf12a470ec67e6bd67f3c631");
  // Never the TLS PSK, and different for another key.
  CHECK(beacon_subkey(key) != beacon_subkey(key_of('b')));
}

TEST_CASE("beacon: another key, a forged HMAC or a changed field is dropped") {
  const ClusterKey key = key_of('a');
  BeaconChecker checker(key);
  auto other = checker.check(sealed(key_of('b'), kNow), kNow);
  CHECK_FALSE(other.accepted);
  CHECK(other.drop == BeaconDrop::kOtherKey);
  CHECK(other.detail.find(key_of('b').id) != std::string::npos);
  CHECK(other.detail.find(key.id) != std::string::npos);

  std::string forged = sealed(key, kNow);
  forged.back() ^= 1;
  CHECK(checker.check(forged, kNow).drop == BeaconDrop::kForged);
  for (size_t at : {5u, 7u, 11u, 21u, 29u}) {  // protocol, address, port, timestamp, nonce
    std::string changed = sealed(key, kNow, 9);
    changed[at] ^= 0x40;
    auto verdict = checker.check(changed, kNow);
    CHECK_FALSE(verdict.accepted);
    CHECK(verdict.drop == BeaconDrop::kForged);
  }
  // A forgery is not remembered: the genuine beacon with that nonce still passes.
  CHECK(checker.check(sealed(key, kNow, 9), kNow).accepted);
}

TEST_CASE("beacon: a timestamp outside the window is dropped as stale") {
  const ClusterKey key = key_of('a');
  BeaconChecker checker(key);
  CHECK(checker.check(sealed(key, kNow - kBeaconWindowMs + 1, 1), kNow).accepted);
  CHECK(checker.check(sealed(key, kNow + kBeaconWindowMs - 1, 2), kNow).accepted);
  CHECK(checker.check(sealed(key, kNow - kBeaconWindowMs - 1, 3), kNow).drop == BeaconDrop::kStale);
  CHECK(checker.check(sealed(key, kNow + kBeaconWindowMs + 1, 4), kNow).drop == BeaconDrop::kStale);
  CHECK(checker.check(sealed(key, -5, 5), kNow).drop == BeaconDrop::kStale);
  CHECK(checker.check(sealed(key, INT64_MIN, 6), kNow).drop == BeaconDrop::kStale);
}

TEST_CASE("beacon: a replay within the window is dropped, and after it is stale") {
  const ClusterKey key = key_of('a');
  BeaconChecker checker(key);
  const std::string datagram = sealed(key, kNow);
  CHECK(checker.check(datagram, kNow).accepted);
  auto again = checker.check(datagram, kNow + 1000);
  CHECK_FALSE(again.accepted);
  CHECK(again.drop == BeaconDrop::kReplayed);
  CHECK(checker.check(datagram, kNow + kBeaconWindowMs - 1).drop == BeaconDrop::kReplayed);
  // Once the nonce is forgotten, the timestamp check refuses the copy.
  CHECK(checker.check(datagram, kNow + kBeaconWindowMs + 1).drop == BeaconDrop::kStale);
  // Another nonce from the same agent is fresh.
  CHECK(checker.check(sealed(key, kNow, 8), kNow).accepted);
}

TEST_CASE("beacon: the nonce cache is bounded") {
  const ClusterKey key = key_of('a');
  BeaconChecker checker(key);
  Beacon b;
  b.timestamp_ms = kNow;
  for (size_t i = 0; i < kBeaconNonceCacheSize + 10; ++i) {
    std::memcpy(b.nonce.data(), &i, sizeof i);
    REQUIRE(checker.check(seal_beacon(b, key), kNow).accepted);
  }
  // The latest is still remembered.
  CHECK(checker.check(seal_beacon(b, key), kNow).drop == BeaconDrop::kReplayed);
}

TEST_CASE("beacon: truncated, oversized, garbage and other formats are dropped") {
  const ClusterKey key = key_of('a');
  BeaconChecker checker(key);
  const std::string datagram = sealed(key, kNow);
  for (size_t n = 0; n < datagram.size(); ++n) {
    auto verdict = checker.check(datagram.substr(0, n), kNow);
    CHECK_FALSE(verdict.accepted);
    CHECK(verdict.drop == BeaconDrop::kMalformed);
    CHECK(verdict.detail.find('\n') == std::string::npos);
  }
  CHECK(checker.check(datagram + "x", kNow).drop == BeaconDrop::kMalformed);
  CHECK(checker.check(datagram + std::string(4000, 'x'), kNow).drop == BeaconDrop::kMalformed);
  CHECK(checker.check(std::string(77, '\0'), kNow).drop == BeaconDrop::kMalformed);
  CHECK(checker.check("GET / HTTP/1.1\r\n\r\n", kNow).drop == BeaconDrop::kMalformed);
  std::string newer = datagram;
  newer[4] = 3;  // 1 and 2 are read (peer_beacon6_test.cc)
  auto verdict = checker.check(newer + "more", kNow);
  CHECK(verdict.drop == BeaconDrop::kFormat);
  CHECK(verdict.detail.find("format 3") != std::string::npos);
  // None of it spoiled the genuine beacon.
  CHECK(checker.check(datagram, kNow).accepted);
}

TEST_CASE("beacon: a keyless receiver accepts nothing, not even the public key's beacons") {
  const ClusterKey none = no_cluster_key();
  BeaconChecker checker(none);
  CHECK(checker.check(sealed(none, kNow), kNow).drop == BeaconDrop::kOtherKey);
  CHECK(checker.check(sealed(key_of('a'), kNow), kNow).drop == BeaconDrop::kOtherKey);
}

TEST_CASE("beacon drop log: one line per cause per interval, the rest counted") {
  std::vector<std::string> lines;
  BeaconDropLog log([&](const std::string& line) { lines.push_back(line); },
                    std::chrono::seconds(10));
  const auto t0 = BeaconDropLog::Clock::now();
  for (int i = 0; i < 100; ++i)
    log.dropped(BeaconDrop::kForged, "10.0.0.9:1234", "bad HMAC",
                t0 + std::chrono::milliseconds(i));
  log.dropped(BeaconDrop::kMalformed, "10.0.0.9:1234", "not a cairn beacon", t0);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "dropped a beacon from 10.0.0.9:1234 (forged): bad HMAC");
  CHECK(lines[1].find("(malformed)") != std::string::npos);
  log.dropped(BeaconDrop::kForged, "10.0.0.9:1234", "bad HMAC", t0 + std::chrono::seconds(11));
  REQUIRE(lines.size() == 3);
  CHECK(lines[2].find("and 99 more dropped for the same cause") != std::string::npos);
  log.dropped(BeaconDrop::kForged, "10.0.0.9:1234", "bad HMAC", t0 + std::chrono::seconds(12));
  log.flush();
  REQUIRE(lines.size() == 4);
  CHECK(lines[3] == "1 more beacons dropped (forged)");
  CHECK(log.count(BeaconDrop::kForged) == 102);
}

uint16_t free_udp_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &n);
  return ntohs(a.sin_port);
}

void send_udp(uint16_t port, const std::string& datagram) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  ::sendto(fd.get(), datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&a),
           sizeof a);
}

TEST_CASE("discovery: beacons on a socket propose peers; forged and replayed ones do not") {
  const ClusterKey key = key_of('a');
  const uint16_t port = free_udp_port();
  std::promise<void> listening;
  std::vector<std::string> lines;
  DiscoveryOptions options;
  options.window = std::chrono::milliseconds(1500);
  options.beacon_port = port;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  options.listening = [&] { listening.set_value(); };
  auto result = std::async(std::launch::async, [&] { return discover_peers(key, options); });
  REQUIRE(listening.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const std::string good = sealed(key, unix_now_ms(), 1, 7071);
  send_udp(port, good);
  send_udp(port, good);                                 // replayed
  send_udp(port, sealed(key, unix_now_ms(), 2, 7071));  // the same agent again: shown once
  std::string forged = sealed(key, unix_now_ms(), 3, 7072);
  forged[60] ^= 1;
  send_udp(port, forged);
  send_udp(port, sealed(key_of('b'), unix_now_ms(), 4, 7073));
  send_udp(port, std::string(2000, 'x'));
  REQUIRE(result.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  auto found = result.get();
  REQUIRE(found.ok());
  REQUIRE(found->peers.size() == 1);
  CHECK(found->peers[0].address.text() == "10.0.0.5:7071");
  CHECK(found->peers[0].protocol == kPeerProtocolVersion);
  CHECK(found->dropped[static_cast<int>(BeaconDrop::kReplayed)] == 1);
  CHECK(found->dropped[static_cast<int>(BeaconDrop::kForged)] == 1);
  CHECK(found->dropped[static_cast<int>(BeaconDrop::kOtherKey)] == 1);
  CHECK(found->dropped[static_cast<int>(BeaconDrop::kMalformed)] == 1);
  bool oversized_named = false;
  for (const auto& line : lines)
    oversized_named = oversized_named || line.find("datagram of 2000 bytes") != std::string::npos;
  CHECK(oversized_named);
}

TEST_CASE("announcer: beacons reach a listener, name the listening address, and stop") {
  const ClusterKey key = key_of('a');
  const uint16_t port = free_udp_port();
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval wait{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  AnnounceOptions options;
  options.interval = std::chrono::milliseconds(100);
  options.agent_port = 4242;
  options.listen_host = "127.0.0.1";
  options.to.push_back(PeerAddress{"127.0.0.1", port});
  std::vector<std::string> lines;
  std::mutex mutex;
  auto announcer = Announcer::start(key, options, [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(line);
  });
  REQUIRE(announcer.ok());
  BeaconChecker checker(key);
  for (int i = 0; i < 3; ++i) {  // the first at once, then every interval, each fresh
    char buffer[256];
    const ssize_t got = ::recv(fd.get(), buffer, sizeof buffer, 0);
    REQUIRE(got == static_cast<ssize_t>(kBeaconBytes));
    auto verdict = checker.check(std::string_view(buffer, got), unix_now_ms());
    REQUIRE(verdict.accepted);
    CHECK(verdict.beacon.address_text() == "127.0.0.1:4242");
  }
  announcer->reset();
  {
    std::lock_guard<std::mutex> lock(mutex);
    REQUIRE(lines.size() == 1);  // one line when it starts, none per beacon
    CHECK(lines[0].find("announcing every 0.1 s to 127.0.0.1:") != std::string::npos);
  }
  // Stopped: the thread is joined, so what it sent is queued already (loopback delivers at
  // once); after that, nothing for three intervals.
  char buffer[256];
  while (::recv(fd.get(), buffer, sizeof buffer, MSG_DONTWAIT) > 0) {
  }
  timeval short_wait{0, 300000};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &short_wait, sizeof short_wait);
  CHECK(::recv(fd.get(), buffer, sizeof buffer, 0) < 0);
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

TEST_CASE("announcer: --announce-to's list, a bare host meaning the beacon port") {
  auto list = parse_announce_targets(" 127.0.0.1 , 127.0.0.2:9000,,", 7171);
  REQUIRE(list.ok());
  REQUIRE(list->size() == 2);
  CHECK((*list)[0].text() == "127.0.0.1:7171");
  CHECK((*list)[1].text() == "127.0.0.2:9000");
  CHECK(parse_announce_targets("", 7070)->empty());
  auto bad = parse_announce_targets("127.0.0.1,no.such.host.invalid", 7070);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().kind() == ErrorKind::kBadInput);
  CHECK(bad.status().message().find("no.such.host.invalid") != std::string::npos);
  CHECK_FALSE(parse_announce_targets("127.0.0.1:99999", 7070).ok());
}

TEST_CASE("announcer: an agent on loopback with nowhere to announce says so once") {
  AnnounceOptions options;
  options.interval = std::chrono::milliseconds(50);
  options.listen_host = "127.0.0.1";
  std::vector<std::string> lines;
  std::mutex mutex;
  auto announcer = Announcer::start(key_of('a'), options, [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(line);
  });
  REQUIRE(announcer.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // several rounds
  announcer->reset();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("not announcing: this agent listens on loopback only") == 0);
}

}  // namespace
}  // namespace cairn
