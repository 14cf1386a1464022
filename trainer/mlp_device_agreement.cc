#include "trainer/mlp_device_agreement.h"

#include <algorithm>
#include <string>

#include "common/exit_status.h"

namespace cairn {
namespace {

constexpr const char* kConfirmed = "ok";
constexpr const char* kCannotFollow = "cannot";

std::string confirmation_key(int rank) {
  return std::string(kMlpDeviceKey) + "/rank-" + std::to_string(rank);
}

// The chief's second half when it chose the GPU: every other rank says whether it can
// follow. A rank that cannot exits with its own reason (exit 2 when it would repeat), and
// cairn then stops the gang; the chief must not race it to an exit of its own (its status
// would be the trial's, and the log would blame rank 0), so it waits to be stopped.
Status await_followers(int world_size, KeyValueStore& kv, std::chrono::milliseconds timeout,
                       const MlpStopWait& wait_to_be_stopped) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  const auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  for (int follower = 1; follower < world_size; ++follower) {
    auto said = kv.wait_get(confirmation_key(follower), left());
    if (!said.ok()) {
      return Status::Failed("rank " + std::to_string(follower) +
                            " did not confirm the GPU rank 0 chose (device: auto) within " +
                            std::to_string(timeout.count()) + " ms: " + said.status().message());
    }
    if (*said == kConfirmed) continue;
    wait_to_be_stopped(left());
    return Status::Failed("rank " + std::to_string(follower) +
                          " cannot train on the GPU rank 0 chose (device: auto); its log says why");
  }
  return Status::Ok();
}

}  // namespace

Result<MlpDeviceChoice> agree_mlp_device(MlpDevice wanted, int rank, int world_size,
                                         KeyValueStore& kv, std::chrono::milliseconds timeout,
                                         const MlpGpuCheck& gpu_usable,
                                         const MlpStopWait& wait_to_be_stopped) {
  if (wanted == MlpDevice::kCpu) return choose_mlp_device(wanted, Status::Ok());
  if (wanted != MlpDevice::kAuto || world_size <= 1)
    return choose_mlp_device(wanted, gpu_usable(world_size));
  if (rank == 0) {
    auto choice = choose_mlp_device(MlpDevice::kAuto, gpu_usable(world_size));
    if (!choice.ok()) return choice;
    if (Status st = kv.set(kMlpDeviceKey, choice->cuda ? "cuda" : "cpu"); !st.ok())
      return Status::Failed("cannot publish the device to the other ranks: " + st.message());
    if (!choice->cuda) return choice;  // every rank can follow the CPU
    if (Status st = await_followers(world_size, kv, timeout, wait_to_be_stopped); !st.ok())
      return st;
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
  const Status mine = gpu_usable(world_size);
  // Said before this rank exits, so the chief never starts NCCL's rendezvous for a gang that
  // cannot form. A failed write changes nothing here: the chief then times out.
  (void)kv.set(confirmation_key(rank), mine.ok() ? kConfirmed : kCannotFollow);
  if (!mine.ok()) {
    const std::string message = "device: auto: rank 0 trains on the GPU but rank " +
                                std::to_string(rank) + " cannot: " + mine.message() +
                                " (every rank of a trial needs a GPU, or set device: cpu)";
    // As choose_mlp_device: exit 2 only when this rank's answer would repeat.
    return is_permanent_failure(mine) ? Status::BadInput(message) : Status::Failed(message);
  }
  return MlpDeviceChoice{.cuda = true, .note = "cuda (auto, as rank 0)"};
}

}  // namespace cairn
