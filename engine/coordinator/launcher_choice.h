// Which machines a coordinator's ranks run on (docs/peers.md "Placement"): this one, unless
// `--slots 0`, and every agent of `--peers` / `resources.peers`, each behind its launcher in
// one MachineLaunchers (machine 0 is this one, then the agents in the order listed).
//
// Thread-safety: call from the coordinator's thread; reconnect_agent from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/coordinator/machine_launchers.h"
#include "engine/coordinator/remote_launcher.h"

namespace cairn {

// One machine as placement sees it.
struct MachineInfo {
  std::string address;  // "" for this machine; an agent's "host:port"
  int slots = 0;        // 0: none (this machine with --slots 0; an agent not reached)
  std::vector<std::string> gpu_names;  // as CUDA_VISIBLE_DEVICES names them; empty: CPU slots
  // How the other machines reach it: an agent's address as this machine connected to it,
  // this machine's own address on a connection to an agent ("" while no agent is connected).
  std::string reach_address;
  std::string name() const { return address.empty() ? "local" : address; }
};

struct Machines {
  std::unique_ptr<MachineLaunchers> launchers;
  std::vector<MachineInfo> info;  // by machine index
  // An agent that could not be connected, one line each: its machine starts lost (no slots
  // offered) and is tried again while the experiment runs.
  std::vector<std::string> warnings;
};

// `local` is this machine (slots 0 with --slots 0); `peers` as listed ("host:port");
// `key_file` is --key-file ("" for the usual lookup, peer/key_location.h). Each agent is
// connected (and asked its slots) within a few seconds, all at once.
Machines connect_machines(MachineInfo local, const std::vector<std::string>& peers,
                          const std::string& key_file);

// A launcher for an agent again (after its machine was lost), or why not; bounded by a few
// seconds. The launcher does not reap this process's children (the local one does).
Result<std::unique_ptr<RemoteLauncher>> reconnect_agent(const std::string& address,
                                                        const std::string& key_file);

}  // namespace cairn
