// --slots, --peers and --key-file: where a new experiment's trials run, for `cairn run` and
// `cairn reproduce` alike (docs/peers.md "Placement"). Read, checked and recorded the same
// way, so that a re-run can go where a run can, and is refused for the same reasons.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/new_experiment.h"
#include "common/status.h"
#include "engine/config/config.h"

namespace cairn::cli {

struct PlacementOptions {
  int slots = -1;        // --slots: -1 when not given; 0: ranks run on the peers only
  std::string peers;     // --peers as given: "HOST:PORT,…", "auto" among them ("": not given)
  std::string key_file;  // --key-file ("": CAIRN_KEY_FILE, else the per-user default)
};

// Adds --slots, --peers and --key-file to `cmd`, writing into `opts` (which must outlive
// it). `slots_default` says what --slots is when not given ("GPUs, or CPU cores").
void add_placement_options(CLI::App* cmd, PlacementOptions& opts, const std::string& slots_default);

// Before anything is created: asks the peers (--peers, else the config's resources.peers;
// every listed one must answer with our key and version: check_run_peers()), refuses
// --slots 0 with no peer, and checks that the config's resources fit this machine's slots
// (--slots, else `default_slots`, 0 for the machine's default) and the peers' together
// (check_cluster_resources()). On success, fills what.slots, run_locally, peers and
// key_file for create_and_drive(); on failure (kBadInput, one line) leaves `what` alone.
Status place_new_experiment(const PlacementOptions& opts, const ExperimentConfig& config,
                            int default_slots, NewExperiment& what);

}  // namespace cairn::cli
