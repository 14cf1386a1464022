// All-reduce of GPU buffers over NCCL.
//
// Neither NCCL nor the CUDA runtime is linked: libnccl.so.2 and the CUDA driver
// (libcuda.so.1) are opened with dlopen on first use, and the few types and functions used
// are declared in nccl_collective.cc (NCCL's ABI for them has been stable since 2.14), so
// cairn builds without NCCL headers and runs where there is no GPU. The driver API stands
// in for cudart: it is present wherever a GPU driver is, cudart is not.
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

#include "common/status.h"
#include "gpu/collective.h"
#include "gpu/kv_store.h"

namespace cairn {

struct NcclOptions {
  // CUDA device ordinal as this process sees it (cairn sets CUDA_VISIBLE_DEVICES per rank,
  // so usually 0).
  int device = 0;
  // Namespace of the unique-id key in the store; must differ between attempts.
  std::string key_prefix = "nccl";
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

// libnccl as this file loads it (once per process, never unloaded): Ok with its version,
// or kNotFound saying what is missing. gpu/runtime_probe.h reports this, so `cairn doctor`
// checks NCCL exactly as the collective will.
struct NcclLibrary {
  bool loaded = false;  // libnccl opened, whether or not cairn can use it
  Status status;
  // ncclGetVersion, e.g. 22703, also when too old for cairn (the dependency fingerprint
  // records it); 0 when not loaded or the call fails.
  int version = 0;
};
NcclLibrary nccl_library();

// Whether libnccl and a CUDA driver with at least one device can be loaded here.
bool nccl_available();

// Blocks until all ranks have joined or the timeout passes. kNotFound "NCCL not found"
// (or "CUDA driver not found") when the libraries are absent. Buffers given to the
// collective are device memory on `options.device`, and must be ready (the kernels writing
// them finished) when passed.
Result<std::unique_ptr<Collective>> make_nccl_collective(KeyValueStore& kv, int rank, int size,
                                                         const NcclOptions& options = {});

// Device memory through the run-time loaded driver, for tests and benchmarks of the NCCL
// path.
class CudaDeviceBuffer {
 public:
  static Result<std::unique_ptr<CudaDeviceBuffer>> allocate(int device, size_t bytes);
  ~CudaDeviceBuffer();
  CudaDeviceBuffer(const CudaDeviceBuffer&) = delete;
  CudaDeviceBuffer& operator=(const CudaDeviceBuffer&) = delete;

  void* data() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }
  Status upload(const void* host, size_t bytes);
  Status download(void* host, size_t bytes) const;

 private:
  CudaDeviceBuffer(int device, void* context, unsigned long long ptr, size_t bytes)
      : device_(device), context_(context), ptr_(ptr), bytes_(bytes) {}
  int device_;
  void* context_;  // the device's primary context, retained while the buffer lives
  unsigned long long ptr_;
  size_t bytes_;
};

}  // namespace cairn
