// `cairn peers`: the agents this machine can use, as seen now — each one's address, slots,
// devices, cairn version, how it was found, and whether it can be used (docs/peers.md).
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "cli/command.h"
#include "cli/run_peers.h"
#include "cli/table.h"
#include "peer/agent_client.h"
#include "peer/discovery.h"
#include "peer/key_location.h"
#include "peer/lan_interfaces.h"

namespace cairn::cli {

namespace {

struct PeersOptions {
  std::string peers;
  std::string key_file;
  double timeout = 5;
  bool json = false;
  double discover = 3;
  bool discover_given = false;
  int beacon_port = kDefaultBeaconPort;
};

std::string devices_text(const Json& devices) {
  if (!devices.is_array() || devices.empty()) return "-";
  if (devices.size() == 1 && devices[0] == "cpu") return "cpu";
  return std::to_string(devices.size()) + " gpu";
}

int peers(const PeersOptions& options) {
  ::signal(SIGPIPE, SIG_IGN);  // a peer that closes mid-write is an error, not our death
  bool discover = options.peers.empty() || options.discover_given;
  auto list = parse_peer_list(peers_without_auto(options.peers, &discover));
  if (!list.ok()) return fail(list.status());
  auto key = find_cluster_key(options.key_file);
  if (!key.ok()) return fail(key.status());
  auto tls = TlsContext::make(TlsContext::Side::kClient, *key);
  if (!tls.ok()) return fail(tls.status());

  std::vector<std::string> found_by(list->size(), "list");
  if (discover) {
    if (key->none())
      std::cerr << "cairn: no cluster key, and only agents with one announce themselves: "
                   "discovery finds none (pass --key-file, or list agents with --peers)\n";
    DiscoveryOptions discovery;
    discovery.window = std::chrono::milliseconds(static_cast<int64_t>(options.discover * 1000));
    discovery.beacon_port = static_cast<uint16_t>(options.beacon_port);
    discovery.log = [](const std::string& line) { std::cerr << "cairn: " << line << "\n"; };
    auto heard = discover_peers(*key, discovery);
    if (!heard.ok()) return fail(heard.status());
    std::vector<std::string> listed_names;
    for (const PeerAddress& listed : *list)
      for (std::string& name : numeric_peer_names(listed)) listed_names.push_back(std::move(name));
    for (const DiscoveredPeer& peer : heard->peers) {
      const std::string name = peer.address.text();
      if (std::find(listed_names.begin(), listed_names.end(), name) != listed_names.end()) continue;
      listed_names.push_back(name);
      list->push_back(peer.address);
      found_by.push_back(peer.via);
    }
  }

  // Every peer at once: the command takes as long as the slowest, bounded by --timeout.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(options.timeout * 1000));
  std::vector<AgentStatus> found(list->size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < list->size(); ++i)
    threads.emplace_back([&, i] { found[i] = query_agent_status((*list)[i], *tls, deadline); });
  for (auto& thread : threads) thread.join();
  for (size_t i = 0; i < found.size(); ++i) found[i].found_by = found_by[i];
  // One row per agent: listed peers come first, so a listed agent keeps its name.
  {
    const std::vector<bool> first = first_of_each_agent(found);
    std::vector<AgentStatus> once;
    for (size_t i = 0; i < found.size(); ++i) {
      if (first[i]) {
        once.push_back(std::move(found[i]));
        continue;
      }
      // Said when a listed address is the one left out; two discovered addresses of one
      // agent (its IPv4 and IPv6 beacons) are expected, and shown once silently.
      for (const AgentStatus& kept : once)
        if (kept.agent == found[i].agent &&
            (kept.found_by == "list" || found[i].found_by == "list"))
          std::cerr << "cairn: " << found[i].address << " is the agent at " << kept.address
                    << " (agent id " << kept.agent << "): shown once\n";
    }
    found = std::move(once);
  }

  bool all_ok = true;
  for (const AgentStatus& status : found) all_ok = all_ok && status.failure == PeerFailure::kNone;
  if (found.empty()) {
    if (discover)
      std::cerr << "cairn: no peers: no agent with this cluster key announced itself within "
                << options.discover << " s (key id " << key->id
                << "); list agents with --peers HOST:PORT,…\n";
    else
      std::cerr << "cairn: no peers\n";
  }
  if (options.json) {
    Json doc = Json::array();
    for (const AgentStatus& status : found) doc.push_back(status.to_json());
    print_json(doc);
    return all_ok ? 0 : 1;
  }
  if (found.empty()) return 0;
  Table table({"ADDRESS", "FOUND", "SLOTS", "DEVICES", "VERSION", "STATUS"});
  for (const AgentStatus& status : found) {
    const bool ok = status.failure == PeerFailure::kNone;
    table.add(
        {status.address, status.found_by,
         ok ? std::to_string(status.slots_free) + "/" + std::to_string(status.slots_total) : "-",
         ok ? devices_text(status.devices) : "-", status.version.empty() ? "-" : status.version,
         peer_failure_name(status.failure)});
  }
  table.print(std::cout);
  for (const AgentStatus& status : found)
    if (status.failure != PeerFailure::kNone) std::cerr << "cairn: " << status.error << "\n";
  return all_ok ? 0 : 1;
}

}  // namespace

void add_peers(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto options = std::make_shared<PeersOptions>();
  CLI::App* cmd = app.add_subcommand(
      "peers", "List the agents this machine can use: address, slots, devices, version, status");
  cmd->add_option("--peers", options->peers,
                  "Agents to ask, comma-separated; \"auto\" (also the default) adds the agents "
                  "discovered on the LAN")
      ->type_name("HOST:PORT,...|auto");
  cmd->add_option("--key-file", options->key_file,
                  "Cluster key (default: CAIRN_KEY_FILE, else "
                  "$XDG_CONFIG_HOME/cairn/cluster.key or ~/.config/cairn/cluster.key)")
      ->type_name("FILE");
  cmd->add_option("--timeout", options->timeout,
                  "Seconds to wait for every peer's answer (default 5)")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--discover", options->discover,
                  "Seconds to listen for agents' beacons (default 3); given with a --peers list, "
                  "discovers too")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.1, 3600.0))
      ->each([options](const std::string&) { options->discover_given = true; });
  cmd->add_option("--beacon-port", options->beacon_port,
                  "UDP port to listen on for beacons (default 7070)")
      ->type_name("PORT")
      ->check(CLI::Range(1, 65535));
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->callback([&outcome, options] { outcome.exit_code = peers(*options); });
  (void)global;
}

}  // namespace cairn::cli
