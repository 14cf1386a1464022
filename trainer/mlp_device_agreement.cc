#include "trainer/mlp_device_agreement.h"

#include <string>

#include "common/exit_status.h"

namespace cairn {

Result<MlpDeviceChoice> agree_mlp_device(MlpDevice wanted, int rank, int world_size,
                                         KeyValueStore& kv, std::chrono::milliseconds timeout,
                                         const MlpGpuCheck& gpu_usable) {
  if (wanted == MlpDevice::kCpu) return choose_mlp_device(wanted, Status::Ok());
  if (wanted != MlpDevice::kAuto || world_size <= 1)
    return choose_mlp_device(wanted, gpu_usable(world_size));
  if (rank == 0) {
    auto choice = choose_mlp_device(MlpDevice::kAuto, gpu_usable(world_size));
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
  if (Status mine = gpu_usable(world_size); !mine.ok()) {
    const std::string message = "device: auto: rank 0 trains on the GPU but rank " +
                                std::to_string(rank) + " cannot: " + mine.message() +
                                " (every rank of a trial needs a GPU, or set device: cpu)";
    // As choose_mlp_device: exit 2 only when this rank's answer would repeat.
    return is_permanent_failure(mine) ? Status::BadInput(message) : Status::Failed(message);
  }
  return MlpDeviceChoice{.cuda = true, .note = "cuda (auto, as rank 0)"};
}

}  // namespace cairn
