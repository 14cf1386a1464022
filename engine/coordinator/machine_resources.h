// What this machine offers an experiment (slots, GPUs), and whether that is enough for what
// its config asks of `resources`. Checked before an experiment is created, so that a config
// this machine cannot run leaves nothing behind (SPEC §2), and again on every resume, which
// may happen on another machine or with fewer slots.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "engine/config/config.h"

namespace cairn {

// The GPUs trials may use: the CUDA driver's device count (the driver loader only, NCCL is
// not loaded), or 0 with `resources.devices: cpu`.
int usable_gpus(const ExperimentConfig& config);

// The slots of this machine: `requested` (--slots) when positive, else one per GPU on a GPU
// machine, else one per CPU core.
int machine_slots(int requested, int gpus);

// kBadInput, one line naming the config's place and key ("exp.yaml:7: resources.devices:
// …"), when `resources.devices: gpu` finds no GPU or a trial needs more slots than `slots`.
Status check_machine_resources(const ExperimentConfig& config, int gpus, int slots);

// What one peer offers, as its agent's status said.
struct PeerSlots {
  std::string address;  // "host:port"
  int slots = 0;
  bool gpus = false;  // its slots are GPUs
};

// check_machine_resources over this machine (`local_slots`, 0 with --slots 0) and its peers
// (docs/peers.md "Placement"): a trial's ranks may be split over machines, so what must fit
// is the largest gang in all their slots (with `resources.devices: gpu`, the GPU machines'
// only). With no peers, the same check and message as check_machine_resources.
Status check_cluster_resources(const ExperimentConfig& config, int local_gpus, int local_slots,
                               const std::vector<PeerSlots>& peers);

// The three above, for the machine cairn runs on with --slots `requested` (0: default).
Status check_machine_resources(const ExperimentConfig& config, int requested_slots);

}  // namespace cairn
