#include "cli/placement_options.h"

#include <algorithm>

#include "cli/run_peers.h"
#include "engine/coordinator/machine_resources.h"

namespace cairn::cli {

void add_placement_options(CLI::App* cmd, PlacementOptions& opts,
                           const std::string& slots_default) {
  cmd->add_option("--slots", opts.slots,
                  "Slots to use on this machine (default: " + slots_default +
                      "; 0: none, the trials run on the peers only)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--peers", opts.peers,
                  "Also run trials and ranks on these agents (default: resources.peers; "
                  "\"auto\" adds the agents discovered on the LAN in 3 s; see docs/peers.md)")
      ->type_name("HOST:PORT,...|auto");
  cmd->add_option("--key-file", opts.key_file,
                  "Cluster key for --peers (default: CAIRN_KEY_FILE, else "
                  "$XDG_CONFIG_HOME/cairn/cluster.key or ~/.config/cairn/cluster.key)")
      ->type_name("FILE");
}

Status place_new_experiment(const PlacementOptions& opts, const ExperimentConfig& config,
                            int default_slots, NewExperiment& what) {
  // Every listed agent must answer now (key, version, slots), or nothing is created.
  auto peers = check_run_peers(opts.peers, config, opts.key_file, /*require_all=*/true);
  if (!peers.ok()) return peers.status();
  if (opts.slots == 0 && peers->addresses.empty()) {
    bool discovered = false;  // auto was asked for, and found no agent (said on the line above)
    if (!opts.peers.empty())
      (void)peers_without_auto(opts.peers, &discovered);
    else
      discovered = config.resources.peers_mode == "auto";
    return Status::BadInput(
        discovered ? "--slots 0 runs nothing on this machine, and auto found no agent: start "
                     "cairn agent with the cluster key on the machines that run the trials, "
                     "or name them with --peers HOST:PORT,… (docs/peers.md)"
                   : "--slots 0 runs nothing on this machine: name the agents that run the "
                     "trials with --peers HOST:PORT,… or resources.peers (docs/peers.md)");
  }
  // So are the resources, over this machine and the peers: a config they cannot run must not
  // leave an experiment behind that stays ACTIVE and that every `resume --all` tries again.
  const int slots = opts.slots < 0 ? std::max(0, default_slots) : opts.slots;
  const int gpus = usable_gpus(config);
  const int local_slots = opts.slots == 0 ? 0 : machine_slots(slots, gpus);
  if (Status st = check_cluster_resources(config, gpus, local_slots, peers->slots); !st.ok())
    return st;
  what.slots = slots;
  what.run_locally = opts.slots != 0;
  what.peers = std::move(peers->addresses);
  what.key_file = opts.key_file;
  return Status::Ok();
}

}  // namespace cairn::cli
