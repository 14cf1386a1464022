// How much of a GPU's memory builtin:mlp counts on when it decides that a model or data can
// never fit (kBadInput, exit 2) rather than not fitting now (kFailed, exit 1, retried).
// Not the whole memory: the CUDA context (the driver's own state, the loaded kernels,
// cuBLAS's workspace) takes a few hundred MiB before the first allocation, more on larger
// GPUs, so a need just under the total could never be allocated, and the trial would be
// restarted until max_restarts for nothing.
#pragma once

#include <algorithm>
#include <cstdint>

namespace cairn {

// 5 % of the GPU's memory or 512 MiB, whichever is larger: above what a primary context
// with cuBLAS takes on current GPUs (~300-500 MiB), so that a need counted as fitting has
// a chance to, while needs a little smaller than that are left to fail as kFailed.
inline constexpr uint64_t kMinGpuMemoryReserve = uint64_t{512} << 20;
inline constexpr uint64_t gpu_memory_reserve(uint64_t total) {
  return std::max(total / 20, kMinGpuMemoryReserve);
}

// What the trainer may ever hope to allocate on a GPU of `total` bytes.
inline constexpr uint64_t gpu_memory_usable(uint64_t total) {
  const uint64_t reserve = gpu_memory_reserve(total);
  return total > reserve ? total - reserve : 0;
}

}  // namespace cairn
