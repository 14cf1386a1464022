// The agent's side of discovery (docs/peers.md, "Discovery"): a thread that sends a sealed
// beacon (beacon.h) every interval to the IPv4 multicast group and to the broadcast address
// of each IPv4 interface that is up (where routers or switches do not carry multicast), to
// the IPv6 link-local group on each IPv6 interface that is up, and to any address named
// with `cairn agent --announce-to`. Each copy is its own beacon (its own
// nonce), so a receiver never mistakes the multicast and broadcast copies for a replay.
//
// An agent without a cluster key never announces (cli/agent.cc does not start one): its
// beacons could not be authenticated.
//
// Thread-safety: start() and the destructor are called from one thread; the announcing
// thread only reads the options it was given.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "peer/beacon.h"
#include "peer/cluster_key.h"
#include "peer/peer_address.h"

namespace cairn {

struct AnnounceOptions {
  std::chrono::milliseconds interval{2000};
  uint16_t beacon_port = kDefaultBeaconPort;  // UDP port of the multicast and broadcast copies
  uint16_t agent_port = kDefaultAgentPort;    // what the beacons announce
  // The host the agent listens on: "" or "::" (every address) announces on every interface,
  // each beacon naming that interface's address (IPv6: its link-local one); "0.0.0.0" on
  // every IPv4 interface; a specific address only on the interface that has it, naming it;
  // a loopback address on none (only to `to`).
  std::string listen_host;
  bool lan = true;              // multicast and broadcast on the interfaces
  std::vector<PeerAddress> to;  // extra destinations (unicast or broadcast), port = UDP port
};

// `--announce-to`'s list: "HOST[:PORT],…" ("[IPv6]:PORT", "[fe80::1%eth0]"), a HOST alone
// meaning `beacon_port`; each must resolve. kBadInput with one line naming the first bad item.
Result<std::vector<PeerAddress>> parse_announce_targets(const std::string& text,
                                                        uint16_t beacon_port);

class Announcer {
 public:
  // Starts announcing at once (the first beacon goes out before this returns). `log` gets
  // one line when the set of destinations is first known and whenever it changes, and one
  // per destination that starts failing. kBadInput when a `to` host does not resolve.
  static Result<std::unique_ptr<Announcer>> start(ClusterKey key, AnnounceOptions options,
                                                  std::function<void(const std::string&)> log);
  ~Announcer();  // stops the thread and joins it
  Announcer(const Announcer&) = delete;
  Announcer& operator=(const Announcer&) = delete;

 private:
  struct Impl;
  explicit Announcer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn
