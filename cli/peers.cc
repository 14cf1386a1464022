// `cairn peers`: the agents this machine can use, as seen now — each one's address, slots,
// devices, cairn version, how it was found, and whether it can be used (docs/peers.md).
#include <signal.h>

#include <iostream>
#include <thread>

#include "cli/command.h"
#include "cli/table.h"
#include "peer/agent_client.h"
#include "peer/key_location.h"

namespace cairn::cli {

namespace {

struct PeersOptions {
  std::string peers;
  std::string key_file;
  double timeout = 5;
  bool json = false;
};

std::string devices_text(const Json& devices) {
  if (!devices.is_array() || devices.empty()) return "-";
  if (devices.size() == 1 && devices[0] == "cpu") return "cpu";
  return std::to_string(devices.size()) + " gpu";
}

int peers(const PeersOptions& options) {
  ::signal(SIGPIPE, SIG_IGN);  // a peer that closes mid-write is an error, not our death
  auto list = parse_peer_list(options.peers);
  if (!list.ok()) return fail(list.status());
  auto key = find_cluster_key(options.key_file);
  if (!key.ok()) return fail(key.status());
  auto tls = TlsContext::make(TlsContext::Side::kClient, *key);
  if (!tls.ok()) return fail(tls.status());

  // Every peer at once: the command takes as long as the slowest, bounded by --timeout.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(options.timeout * 1000));
  std::vector<AgentStatus> found(list->size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < list->size(); ++i)
    threads.emplace_back([&, i] { found[i] = query_agent_status((*list)[i], *tls, deadline); });
  for (auto& thread : threads) thread.join();

  bool all_ok = true;
  for (const AgentStatus& status : found) all_ok = all_ok && status.failure == PeerFailure::kNone;
  if (options.json) {
    Json doc = Json::array();
    for (const AgentStatus& status : found) doc.push_back(status.to_json());
    print_json(doc);
    return all_ok ? 0 : 1;
  }
  if (found.empty()) {
    std::cerr << "cairn: no peers: pass --peers HOST:PORT,… (discovery on the LAN is not "
                 "implemented yet)\n";
    return 0;
  }
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
  cmd->add_option("--peers", options->peers, "Agents to ask, comma-separated")
      ->type_name("HOST:PORT,...");
  cmd->add_option("--key-file", options->key_file,
                  "Cluster key (default: CAIRN_KEY_FILE, else "
                  "$XDG_CONFIG_HOME/cairn/cluster.key or ~/.config/cairn/cluster.key)")
      ->type_name("FILE");
  cmd->add_option("--timeout", options->timeout,
                  "Seconds to wait for every peer's answer (default 5)")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->callback([&outcome, options] { outcome.exit_code = peers(*options); });
  (void)global;
}

}  // namespace cairn::cli
