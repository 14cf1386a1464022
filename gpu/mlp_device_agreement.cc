#include "gpu/mlp_device_agreement.h"

#include <string>

namespace cairn {

Result<MlpDeviceChoice> agree_mlp_device(MlpDevice wanted, int rank, int world_size,
                                         KeyValueStore& kv, std::chrono::milliseconds timeout,
                                         const MlpDeviceChooser& choose) {
  if (wanted != MlpDevice::kAuto || world_size <= 1) return choose(wanted, world_size);
  if (rank == 0) {
    auto choice = choose(MlpDevice::kAuto, world_size);
    if (!choice.ok()) return choice;
    if (Status st = kv.set(kMlpDeviceKey, choice->cuda ? "cuda" : "cpu"); !st.ok())
      return Status::Failed("cannot publish the device to the other ranks: " + st.message());
    return choice;
  }
  auto chosen = kv.wait_get(kMlpDeviceKey, timeout);
  if (!chosen.ok()) {
    return Status::Failed("rank 0 did not say which device to use (device: auto) within " +
                          std::to_string(timeout.count()) + " ms: " + chosen.status().message());
  }
  if (*chosen == "cpu") return MlpDeviceChoice{.cuda = false, .note = "cpu (auto, as rank 0)"};
  if (*chosen != "cuda")
    return Status::Failed("rank 0 published an unknown device \"" + *chosen + "\"");
  auto mine = choose(MlpDevice::kCuda, world_size);
  if (!mine.ok()) {
    // choose(kCuda) speaks of the hyperparameter, which says auto here: keep its reason.
    std::string why = mine.status().message();
    const std::string prefix = "cannot train on a GPU: ";
    if (const size_t at = why.find(prefix); at != std::string::npos)
      why = why.substr(at + prefix.size());
    return Status::BadInput("device: auto: rank 0 trains on the GPU but rank " +
                            std::to_string(rank) + " cannot: " + why +
                            " (every rank of a trial needs a GPU, or set device: cpu)");
  }
  return MlpDeviceChoice{.cuda = true, .note = "cuda (auto, as rank 0)"};
}

}  // namespace cairn
