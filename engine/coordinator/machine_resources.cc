#include "engine/coordinator/machine_resources.h"

#include <algorithm>
#include <string>
#include <thread>

#include "gpu/cuda_driver.h"

namespace cairn {
namespace {

// Where a resources key was written, for the message; the file itself when the key was
// left at its default (it cannot be then, but a message should never start with ": ").
std::string place(const std::string& where, const ExperimentConfig& config) {
  return where.empty() ? config.config_path.string() : where;
}

}  // namespace

int usable_gpus(const ExperimentConfig& config) {
  // Also counts where cairn's own GPU code cannot use the driver: trials that bring their
  // own CUDA can.
  return config.resources.devices == "cpu" ? 0 : cuda::driver().device_count;
}

int machine_slots(int requested, int gpus) {
  if (requested > 0) return requested;
  return gpus > 0 ? gpus : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Status check_machine_resources(const ExperimentConfig& config, int gpus, int slots) {
  const ResourcesConfig& resources = config.resources;
  if (resources.devices == "gpu" && gpus <= 0)
    return Status::BadInput(
        place(resources.devices_where, config) +
        ": resources.devices: gpu, but no GPU was found (no CUDA driver or no device)");
  if (resources.slots_per_trial > slots)
    return Status::BadInput(
        place(resources.slots_per_trial_where, config) + ": resources.slots_per_trial: " +
        std::to_string(resources.slots_per_trial) + " is more than the " + std::to_string(slots) +
        " slots of this machine (--slots; by default one per GPU, or per CPU core)");
  return Status::Ok();
}

Status check_cluster_resources(const ExperimentConfig& config, int local_gpus, int local_slots,
                               const std::vector<PeerSlots>& peers) {
  if (peers.empty()) return check_machine_resources(config, local_gpus, local_slots);
  const ResourcesConfig& resources = config.resources;
  const bool gpu_only = resources.devices == "gpu";
  int total = gpu_only && local_gpus <= 0 ? 0 : local_slots;
  std::string listed;
  for (const PeerSlots& peer : peers) {
    const int usable = gpu_only && !peer.gpus ? 0 : peer.slots;
    total += usable;
    listed += (listed.empty() ? "" : ", ") + peer.address + ": " + std::to_string(usable);
  }
  if (gpu_only && total == 0)
    return Status::BadInput(place(resources.devices_where, config) +
                            ": resources.devices: gpu, but neither this machine nor its peers (" +
                            listed + ") have a GPU");
  if (resources.slots_per_trial > total)
    return Status::BadInput(
        place(resources.slots_per_trial_where, config) + ": resources.slots_per_trial: " +
        std::to_string(resources.slots_per_trial) + " is more than the " + std::to_string(total) +
        " slots of this machine (" + std::to_string(gpu_only && local_gpus <= 0 ? 0 : local_slots) +
        ") and its peers (" + listed + ") together");
  return Status::Ok();
}

Status check_machine_resources(const ExperimentConfig& config, int requested_slots) {
  const int gpus = usable_gpus(config);
  return check_machine_resources(config, gpus, machine_slots(requested_slots, gpus));
}

}  // namespace cairn
