// One device for every rank of a data-parallel builtin:mlp trial.
//
// With `device: auto` each rank could decide alone, and ranks on machines that differ (a
// GPU busy or absent, a library missing) would decide differently: the CPU ranks wait in
// Gloo's rendezvous, the GPU ranks in NCCL's, and all of them only fail after
// collective_timeout, to be restarted into the same deadlock. So the decision is made once
// per trial attempt: the chief (rank 0) applies choose_mlp_device's rule (is the GPU
// usable: driver, device, cuBLAS, NVRTC, NCCL) and publishes its choice in the trial's
// key/value table (the control channel's kv_set/kv_get, which
// the Gloo and NCCL rendezvous already use, and which cairn clears for every attempt);
// the other ranks wait for it, before any collective exists, and follow it. When the chief
// picked the GPU, each other rank says whether it can follow (its own key), and the chief
// enters NCCL's rendezvous only once all have said yes. A rank that cannot follow (it has
// no GPU) fails at once with exit 2 and a line saying why; the chief, told so, waits for
// cairn to stop it rather than fail too, so the trial's exit status and log name the rank
// that could not follow, not a chief that gave up in NCCL's rendezvous. The chief decides rather
// than a vote because it needs one round trip and no collective (which is what is being chosen),
// and because the CPU is always a possible answer: the chief's "cpu" every rank can follow.
//
// Not quite as a single process would: one process on `auto` also falls back to the CPU
// when setting the GPU up fails (a model or data larger than the GPU, an NVRTC compile
// error, a module the driver refuses), but the chief publishes before that setup runs. It
// needs the data, read after the ranks connect, and running it before would mean building
// the data and the model twice; once the ranks have chosen NCCL together none can fall
// back alone. So with several ranks those failures end the trial as with `device: cuda`
// (exit 2 when they would repeat; docs/builtin-mlp.md).
//
// `device: cpu` and `device: cuda` need no agreement: each rank applies the same rule, and
// with `cuda` a rank without a usable GPU fails at once (exit 2) rather than waiting.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "collective/kv_store.h"
#include "common/status.h"
#include "trainer/mlp_hparams.h"
#include "trainer/mlp_trainer.h"

namespace cairn {

// The key the chief publishes its choice under ("cpu" or "cuda").
inline constexpr const char* kMlpDeviceKey = "builtin-mlp/device";

// Whether this process can train on a GPU: mlp_gpu_usable, or a stand-in in tests. The
// decision itself is always choose_mlp_device's rule.
using MlpGpuCheck = std::function<Status(int world_size)>;

// How the chief waits, at most the given time, to be stopped by cairn once a rank said it
// cannot follow: a sleep in a trial process (cairn's SIGTERM ends it), a no-op in tests.
using MlpStopWait = std::function<void(std::chrono::milliseconds)>;

inline void sleep_until_stopped(std::chrono::milliseconds at_most) {
  std::this_thread::sleep_for(at_most);
}

// The device this rank trains on, the same on every rank of the trial. Errors: kBadInput
// (exit 2) when this rank cannot use the device the chief chose and that would repeat
// (kFailed when the check failed for now), or as choose_mlp_device;
// kFailed (retryable) when the chief's choice does not arrive within `timeout` or the
// store fails. The chief that chose the GPU returns only once every rank confirmed it
// (kFailed when one did not within `timeout`, or, after `wait_to_be_stopped`, when one
// cannot follow).
Result<MlpDeviceChoice> agree_mlp_device(
    MlpDevice wanted, int rank, int world_size, KeyValueStore& kv,
    std::chrono::milliseconds timeout, const MlpGpuCheck& gpu_usable = mlp_gpu_usable,
    const MlpStopWait& wait_to_be_stopped = sleep_until_stopped);

}  // namespace cairn
