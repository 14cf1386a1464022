// All-reduce of GPU buffers over NCCL.
//
// Neither NCCL nor the CUDA runtime is linked: libnccl.so.2 (gpu/nccl_library.h) and the
// CUDA driver (gpu/cuda_driver.h) are opened with dlopen on first use, so cairn builds
// without NCCL headers and runs where there is no GPU. The driver API stands in for cudart:
// it is present wherever a GPU driver is, cudart is not.
//
// Rendezvous: rank 0 creates the NCCL unique id and publishes it (hex) in the
// KeyValueStore under `key_prefix`; the others read it. The communicator is created in
// NCCL's non-blocking mode so that a rank that never comes makes the others time out
// instead of hanging. Calls are enqueued on one CUDA stream of this collective, in issue
// order; completion is polled against the timeout, and a call that times out aborts the
// communicator.
//
// Determinism: NCCL gives every rank the same result, and the same result run after run
// for the same world size, topology, NCCL version and settings (NCCL_ALGO, NCCL_PROTO);
// unlike the Gloo path that is NCCL's promise, not this file's.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "collective/collective.h"
#include "collective/kv_store.h"
#include "common/status.h"
#include "gpu/nccl_library.h"

namespace cairn {

struct NcclOptions {
  // CUDA device ordinal as this process sees it (cairn sets CUDA_VISIBLE_DEVICES per rank,
  // so usually 0).
  int device = 0;
  // Namespace of the unique-id key in the store; must differ between attempts.
  std::string key_prefix = "nccl";
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

// Blocks until all ranks have joined or the timeout passes. kNotFound "NCCL not found"
// (or "CUDA driver not found") when the libraries are absent. Buffers given to the
// collective are device memory on `options.device`, and must be ready (the kernels writing
// them finished) when passed.
Result<std::unique_ptr<Collective>> make_nccl_collective(KeyValueStore& kv, int rank, int size,
                                                         const NcclOptions& options = {});

}  // namespace cairn
