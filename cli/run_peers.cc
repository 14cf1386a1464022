#include "cli/run_peers.h"

#include <signal.h>

#include <future>
#include <iostream>

#include "peer/agent_client.h"
#include "peer/key_location.h"

namespace cairn::cli {

namespace {

constexpr auto kStatusTime = std::chrono::seconds(10);

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
  for (size_t i = 0; i < parsed.size(); ++i) {
    const AgentStatus status = asking[i].get();
    const std::string text = parsed[i].text();
    if (std::find(peers.addresses.begin(), peers.addresses.end(), text) != peers.addresses.end())
      continue;  // listed twice: one machine
    PeerSlots slots;
    slots.address = text;
    if (status.failure != PeerFailure::kNone) {
      if (require_all) return Status::BadInput("peer " + status.error);
      std::cerr << "cairn: warning: peer " << status.error
                << "; its slots are not used until it answers\n";
    } else {
      slots.slots = status.slots_total;
      for (const Json& device : status.devices)
        if (device.is_string() && device.get<std::string>().rfind("gpu", 0) == 0) slots.gpus = true;
    }
    peers.addresses.push_back(text);
    peers.slots.push_back(slots);
  }
  return peers;
}

Result<RunPeers> check_run_peers(const std::string& listed, const ExperimentConfig& config,
                                 const std::string& key_file, bool require_all) {
  std::vector<std::string> addresses;
  if (!listed.empty()) {
    auto list = parse_peer_list(listed);
    if (!list.ok()) return Status::BadInput("--peers: " + list.status().message());
    for (const PeerAddress& address : *list) addresses.push_back(address.text());
  } else if (config.resources.peers_mode == "list") {
    addresses = config.resources.peers;
  } else if (config.resources.peers_mode == "auto") {
    return Status::BadInput(config.config_path.string() +
                            ": resources.peers: auto needs discovery, which is not built yet; "
                            "list the agents (docs/peers.md)");
  }
  return check_peer_addresses(addresses, key_file, require_all);
}

}  // namespace cairn::cli
