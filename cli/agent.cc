// `cairn agent`: serves this machine's slots to coordinators on other machines (issue 17,
// docs/peers.md). Today it authenticates peers with the cluster key and answers status
// requests; running ranks comes next. `cairn agent --new-key F` writes a new cluster key.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "cli/command.h"
#include "common/build_info.h"
#include "engine/coordinator/agent_gc.h"
#include "engine/coordinator/agent_rank_host.h"
#include "engine/coordinator/agent_shipping.h"
#include "engine/coordinator/machine_resources.h"
#include "engine/coordinator/remote_orphans.h"
#include "engine/coordinator/signal_pipe.h"
#include "engine/coordinator/slot_pool.h"
#include "gpu/cuda_driver.h"
#include "peer/agent_log.h"
#include "peer/agent_server.h"
#include "peer/announcer.h"
#include "peer/key_location.h"
#include "peer/master_ports.h"
#include "peer/peer_address.h"
#include "peer/peer_protocol.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

struct AgentOptions {
  std::string listen;
  int slots = 0;
  std::string key_file;
  std::string dir;
  std::string new_key;
  double announce_interval = 2;
  bool no_announce = false;
  std::string announce_to;
  int beacon_port = kDefaultBeaconPort;
  double keep_days = 14;
  std::string max_cache = "none";
};

// $XDG_STATE_HOME/cairn/agent, else ~/.local/state/cairn/agent.
Result<fs::path> default_agent_dir() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state == '/')
    return fs::path(state) / "cairn" / "agent";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".local" / "state" / "cairn" / "agent";
  return Status::BadInput("no agent directory: HOME and XDG_STATE_HOME are unset (pass --dir DIR)");
}

int new_key(const std::string& file) {
  auto key = write_new_cluster_key(file);
  if (!key.ok()) return fail(key.status());
  std::cout << "wrote a new cluster key to " << file << " (key id " << key->id
            << "): copy it, mode 0600, to every machine of the team\n";
  return 0;
}

// The announcing thread for an agent listening on `address`.
Result<std::unique_ptr<Announcer>> start_announcing(const AgentOptions& options,
                                                    const ClusterKey& key,
                                                    const PeerAddress& address) {
  AnnounceOptions announce;
  announce.interval =
      std::chrono::milliseconds(static_cast<int64_t>(options.announce_interval * 1000));
  announce.beacon_port = static_cast<uint16_t>(options.beacon_port);
  announce.agent_port = address.port;
  announce.listen_host = address.host == "::" ? "" : address.host;
  auto to = parse_announce_targets(options.announce_to, announce.beacon_port);
  if (!to.ok()) return to.status();
  announce.to = std::move(*to);
  return Announcer::start(key, std::move(announce), agent_log);
}

int agent(const AgentOptions& options) {
  if (!options.new_key.empty()) return new_key(options.new_key);
  fs::path key_source;
  auto key = find_cluster_key(options.key_file, &key_source);
  if (!key.ok()) return fail(key.status());

  PeerAddress address;
  if (!options.listen.empty()) {
    auto parsed = parse_peer_address(options.listen);
    if (!parsed.ok()) return fail(parsed.status());
    address = *parsed;
  } else {
    // With a key: every interface; without: loopback only.
    address.host = key->none() ? "127.0.0.1" : "";
  }
  if (key->none()) {
    auto loopback = is_loopback_host(address.host);
    if (!loopback.ok()) return fail(loopback.status());
    if (!*loopback)
      return fail(Status::BadInput(
          "no cluster key, so the agent listens on loopback only, not " + address.text() +
          " (write one with `cairn agent --new-key FILE` and pass --key-file FILE)"));
  }

  auto dir = options.dir.empty() ? default_agent_dir() : Result<fs::path>(fs::path(options.dir));
  if (!dir.ok()) return fail(dir.status());
  std::error_code ec;
  fs::create_directories(*dir, ec);
  if (ec)
    return fail(
        Status::Io("cannot create the agent directory " + dir->string() + ": " + ec.message()));
  ::chmod(dir->c_str(), 0700);

  const int gpus = cuda::driver().device_count;
  AgentInfo info;
  info.slots_total = machine_slots(options.slots, gpus);
  info.dir = *dir;
  if (gpus > 0) {
    for (const std::string& name : gpu_names(gpus, std::getenv("CUDA_VISIBLE_DEVICES")))
      info.devices.push_back("gpu" + name);
  } else {
    info.devices.push_back("cpu");
  }

  // A bad --announce-to is bad input, refused before the agent serves anything.
  if (auto to = parse_announce_targets(options.announce_to, options.beacon_port); !to.ok())
    return fail(to.status());

  // Garbage collection of DIR (agent_gc.h): at start, then hourly.
  AgentGcPolicy gc;
  gc.keep = std::chrono::seconds(static_cast<int64_t>(options.keep_days * 86400));
  auto budget = parse_size(options.max_cache);
  if (!budget.ok()) return fail(Status::BadInput("--max-cache: " + budget.status().message()));
  gc.max_bytes = *budget;
  std::chrono::seconds gc_every = std::chrono::hours(1);
  if (const char* every = std::getenv("CAIRN_AGENT_GC_INTERVAL"); every && std::atoi(every) > 0)
    gc_every = std::chrono::seconds(std::atoi(every));  // tests
  if (const char* grace = std::getenv("CAIRN_AGENT_GC_GRACE"); grace && *grace)
    gc.grace = std::chrono::seconds(std::atoi(grace));  // tests

  auto tls = TlsContext::make(TlsContext::Side::kServer, *key);
  if (!tls.ok()) return fail(tls.status());
  SignalPipe signals;  // before listening: a SIGTERM from now on ends the agent cleanly
  auto listener = listen_on(address);
  if (!listener.ok()) return fail(listener.status());
  address.port = local_port(listener->get());
  agent_log(
      "listening on " +
      (address.host.empty() ? "*:" + std::to_string(address.port) : address.text()) + " (key id " +
      key->id +
      (key->none() ? ", no key file: loopback only, this user only" : ", " + key_source.string()) +
      "; " + std::to_string(info.slots_total) + (info.slots_total == 1 ? " slot" : " slots") +
      "; devices " + info.devices.dump() + "; dir " + dir->string() +
      "; cairn " CAIRN_VERSION ", protocol " + std::to_string(kPeerProtocolVersion) + ")");
  // Beacons (docs/peers.md, "Discovery"): only with a key, which is what authenticates them.
  std::unique_ptr<Announcer> announcer;
  if (!key->none() && !options.no_announce) {
    auto started = start_announcing(options, *key, address);
    if (!started.ok()) return fail(started.status());
    announcer = std::move(*started);
  }
  // Without a key only this agent's own user may connect (peer/keyless_guard.h), so it runs
  // ranks and keeps checkpoints as a keyed one does (docs/peers.md "No key").
  RankHostFactory hosts = [work = *dir] { return make_agent_rank_host(work); };
  AgentServer server(std::move(*listener), std::move(*tls), info, std::move(hosts), "");
  AgentCollector collector(*dir, gc, gc_every);
  server.set_request_handler(
      with_orphan_requests(*dir, with_master_ports(make_shipping_handler(*dir, ""))));
  auto stopped = server.serve(signals.fd());
  announcer.reset();  // no beacon for an agent that no longer serves
  if (!stopped.ok()) {
    agent_log("stopped: " + stopped.status().message());
    return 1;
  }
  agent_log(std::string("stopped (") +
            (*stopped == SIGTERM  ? "SIGTERM"
             : *stopped == SIGINT ? "SIGINT"
                                  : "SIGHUP") +
            ")");
  return 0;
}

}  // namespace

void add_agent(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto options = std::make_shared<AgentOptions>();
  CLI::App* cmd = app.add_subcommand(
      "agent",
      "Serve this machine's slots to cairn coordinators on other machines (peers); runs until "
      "SIGTERM");
  cmd->add_option("--listen", options->listen,
                  "Address to listen on, IPv6 in brackets (default: every interface, port "
                  "7070; loopback only, for this user only, without a cluster key)")
      ->type_name("ADDR:PORT");
  // At least 1: an agent runs ranks only in its slots, and 0 (before: taken as "not given",
  // so the default) offered every core while the user asked for none.
  cmd->add_option("--slots", options->slots,
                  "Slots to offer, at least 1 (default: one per GPU, else one per CPU core)")
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--key-file", options->key_file,
                  "Cluster key (default: CAIRN_KEY_FILE, else "
                  "$XDG_CONFIG_HOME/cairn/cluster.key or ~/.config/cairn/cluster.key)")
      ->type_name("FILE");
  cmd->add_option("--dir", options->dir,
                  "Where the agent keeps its work (default: $XDG_STATE_HOME/cairn/agent or "
                  "~/.local/state/cairn/agent)")
      ->type_name("DIR");
  cmd->add_option("--new-key", options->new_key,
                  "Write a new random cluster key to FILE (mode 0600) and exit")
      ->type_name("FILE");
  cmd->add_option("--announce-interval", options->announce_interval,
                  "Seconds between discovery beacons (default 2)")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--no-announce", options->no_announce,
                "Send no discovery beacons (coordinators must list this agent with --peers)");
  cmd->add_option("--announce-to", options->announce_to,
                  "Also send beacons to these addresses (unicast or broadcast, IPv6 in "
                  "brackets; port: --beacon-port), comma-separated")
      ->type_name("HOST[:PORT],...");
  cmd->add_option("--beacon-port", options->beacon_port,
                  "UDP port of the discovery beacons (default 7070)")
      ->type_name("PORT")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--keep-days", options->keep_days,
                  "Remove code, data, run directories, checkpoint contents and orphan "
                  "checkpoints this agent has not used for DAYS (default 14; never what a "
                  "connected run uses, nor orphans whose ranks run or a resume fetches)")
      ->type_name("DAYS")
      ->check(CLI::Range(0.0, 36500.0));
  cmd->add_option("--max-cache", options->max_cache,
                  "Also keep what DIR caches under SIZE, removing the least recently used first "
                  "(e.g. 50G; default none)")
      ->type_name("SIZE");
  cmd->callback([&outcome, options] { outcome.exit_code = agent(*options); });
  (void)global;
}

}  // namespace cairn::cli
