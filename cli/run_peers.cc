#include "cli/run_peers.h"

#include <netdb.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <future>
#include <iostream>

#include "peer/agent_client.h"
#include "peer/discovery.h"
#include "peer/key_location.h"
#include "peer/lan_interfaces.h"

namespace cairn::cli {

namespace {

constexpr auto kStatusTime = std::chrono::seconds(10);
// How long `auto` listens for agents' beacons (docs/peers.md "Discovery").
constexpr auto kDiscoveryWindow = std::chrono::seconds(3);

// The agents that announce themselves with our key within the window, as "host:port".
Result<std::vector<std::string>> discovered_agents(const std::string& key_file) {
  auto key = find_cluster_key(key_file);
  if (!key.ok()) return key.status();
  if (key->none())
    return Status::BadInput(
        "peers auto: no cluster key, and only agents with one announce themselves (pass "
        "--key-file, or list the agents)");
  DiscoveryOptions options;
  options.window = kDiscoveryWindow;
  // The agents' --beacon-port, when they announce on another port than 7070.
  if (const char* port = std::getenv("CAIRN_BEACON_PORT"); port && *port) {
    const long value = std::strtol(port, nullptr, 10);
    if (value <= 0 || value > 65535)
      return Status::BadInput(std::string("CAIRN_BEACON_PORT: not a port: ") + port);
    options.beacon_port = static_cast<uint16_t>(value);
  }
  options.log = [](const std::string& line) { std::cerr << "cairn: " << line << "\n"; };
  auto heard = discover_peers(*key, options);
  if (!heard.ok()) return heard.status();
  std::vector<std::string> out;
  for (const DiscoveredPeer& peer : heard->peers) out.push_back(peer.address.text());
  return out;
}

}  // namespace

std::string peers_without_auto(const std::string& peers, bool* has_auto) {
  std::string rest;
  for (size_t start = 0; start <= peers.size();) {
    const size_t comma = std::min(peers.find(',', start), peers.size());
    std::string item = peers.substr(start, comma - start);
    start = comma + 1;
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (item == "auto")
      *has_auto = true;
    else if (!item.empty())
      rest += (rest.empty() ? "" : ",") + item;
  }
  return rest;
}

std::vector<std::string> numeric_peer_names(const PeerAddress& address) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.host.c_str(), nullptr, &hints, &found) != 0) return out;
  // As discovery names them: "10.0.0.5:7070", "[fe80::5%eth0]:7070".
  for (addrinfo* a = found; a; a = a->ai_next) {
    if (a->ai_family == AF_INET)
      out.push_back(ipv4_text(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr) + ":" +
                    std::to_string(address.port));
    if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      out.push_back("[" + ipv6_text(in6->sin6_addr, in6->sin6_scope_id) +
                    "]:" + std::to_string(address.port));
    }
  }
  ::freeaddrinfo(found);
  return out;
}

namespace {

// What went wrong with the peer listed as `text`, as one line: its reasons start with its
// address ("127.0.0.1:7071 refused our cluster key …"), and read "peer 127.0.0.1:7071
// refused …"; a connection that could not be made already says "cannot connect to
// ADDRESS: …" (before, "peer cannot connect to …").
std::string peer_failure_line(const std::string& text, const std::string& error) {
  if (error.rfind(text, 0) == 0) return "peer " + error;
  if (error.find(text) != std::string::npos) return error;
  return "peer " + text + ": " + error;
}

}  // namespace

Result<RunPeers> check_peer_addresses(const std::vector<std::string>& addresses,
                                      const std::string& key_file, bool require_all) {
  RunPeers peers;
  if (addresses.empty()) return peers;
  std::vector<PeerAddress> parsed;
  for (const std::string& text : addresses) {
    auto address = parse_peer_address(text);
    if (!address.ok()) return Status::BadInput("peer " + text + ": " + address.status().message());
    parsed.push_back(*address);
  }
  ::signal(SIGPIPE, SIG_IGN);  // the coordinator's SignalPipe does the same
  auto key = find_cluster_key(key_file);
  if (!key.ok()) return key.status();
  auto tls = TlsContext::make(TlsContext::Side::kClient, *key);
  if (!tls.ok()) return tls.status();
  const auto deadline = std::chrono::steady_clock::now() + kStatusTime;
  std::vector<std::future<AgentStatus>> asking;
  for (const PeerAddress& address : parsed)
    asking.push_back(std::async(std::launch::async, query_agent_status, address, *tls, deadline));
  std::vector<AgentStatus> statuses;
  for (auto& answer : asking) statuses.push_back(answer.get());
  const std::vector<bool> first = first_of_each_agent(statuses);
  for (size_t i = 0; i < parsed.size(); ++i) {
    const AgentStatus& status = statuses[i];
    const std::string text = parsed[i].text();
    if (std::find(peers.addresses.begin(), peers.addresses.end(), text) != peers.addresses.end())
      continue;  // listed twice: one machine
    if (!first[i]) {
      // The same agent at another address: its slots are counted once, under the name seen
      // first (a listed one before a discovered one).
      for (const AgentStatus& earlier : statuses)
        if (&earlier != &status && earlier.agent == status.agent) {
          std::cerr << "cairn: peer " << text << " is the agent at " << earlier.address
                    << " (agent id " << status.agent << "): using it once\n";
          break;
        }
      continue;
    }
    PeerSlots slots;
    slots.address = text;
    if (status.failure != PeerFailure::kNone) {
      if (require_all) return Status::BadInput(peer_failure_line(text, status.error));
      peers.warnings.push_back(peer_failure_line(text, status.error) +
                               "; its slots are not used until it answers");
    } else {
      slots.slots = status.slots_total;
      for (const Json& device : status.devices)
        if (device.is_string() && device.get<std::string>().rfind("gpu", 0) == 0) slots.gpus = true;
    }
    peers.addresses.push_back(text);
    peers.slots.push_back(slots);
    peers.agents.push_back(status.failure == PeerFailure::kNone ? status.agent : "");
  }
  return peers;
}

Result<RunPeers> check_run_peers(const std::string& listed, const ExperimentConfig& config,
                                 const std::string& key_file, bool require_all) {
  std::vector<std::string> addresses;
  bool discover = false;
  std::vector<std::string> known;  // the listed peers' numeric names, to take each once
  if (!listed.empty()) {
    auto list = parse_peer_list(peers_without_auto(listed, &discover));
    if (!list.ok()) return Status::BadInput("--peers: " + list.status().message());
    for (const PeerAddress& address : *list) {
      addresses.push_back(address.text());
      for (std::string& name : numeric_peer_names(address)) known.push_back(std::move(name));
    }
  } else if (config.resources.peers_mode == "list") {
    addresses = config.resources.peers;
  } else if (config.resources.peers_mode == "auto") {
    discover = true;
  }
  auto peers = check_peer_addresses(addresses, key_file, require_all);
  if (!peers.ok() || !discover) return peers;
  auto found = discovered_agents(key_file);
  if (!found.ok()) return found.status();
  std::vector<std::string> fresh;
  for (const std::string& address : *found)
    if (std::find(addresses.begin(), addresses.end(), address) == addresses.end() &&
        std::find(known.begin(), known.end(), address) == known.end())
      fresh.push_back(address);
  // A discovered agent that then refuses us is left out with a warning, never fatal: only
  // what the user listed must answer.
  auto more = check_peer_addresses(fresh, key_file, /*require_all=*/false);
  if (!more.ok()) return more.status();
  for (const std::string& warning : more->warnings)
    std::cerr << "cairn: warning: " << warning << "\n";  // left out: no coordinator says it
  for (size_t i = 0; i < more->addresses.size(); ++i) {
    if (more->slots[i].slots == 0) continue;
    // A listed agent heard at another address (its IPv6 beacon, another interface's): its
    // slots are counted once, under the listed name.
    const auto listed_as = std::find(peers->agents.begin(), peers->agents.end(), more->agents[i]);
    if (!more->agents[i].empty() && listed_as != peers->agents.end()) {
      std::cerr << "cairn: peer " << more->addresses[i] << " is the agent at "
                << peers->addresses[listed_as - peers->agents.begin()] << " (agent id "
                << more->agents[i] << "): using it once\n";
      continue;
    }
    peers->addresses.push_back(more->addresses[i]);
    peers->slots.push_back(more->slots[i]);
    peers->agents.push_back(more->agents[i]);
  }
  std::cerr << "cairn: peers auto: " << more->addresses.size() << " agent"
            << (more->addresses.size() == 1 ? "" : "s") << " found in " << kDiscoveryWindow.count()
            << " s\n";
  return peers;
}

}  // namespace cairn::cli
