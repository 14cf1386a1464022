// libnccl, loaded with dlopen on first use and never unloaded (NCCL keeps threads and state
// that must not lose their code under them): the slice of its ABI cairn uses, declared here
// (stable since NCCL 2.14), so cairn builds without NCCL headers and runs where there is no
// GPU. collective/nccl_collective.h builds the all-reduce on it; `cairn doctor`, `cairn
// version` and the dependency fingerprint ask it what is installed.
//
// Thread-safety: the library is loaded once, under a function-local static; everything
// here may be called from any thread.
#pragma once

#include <climits>
#include <cstddef>

#include "common/status.h"
#include "gpu/cuda_driver.h"

namespace cairn {

// libnccl as cairn loads it: Ok with its version, or kNotFound saying what is missing.
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

namespace nccl {

// --- The slice of NCCL used (nccl.h, 2.14 and later). ---
using ncclResult_t = int;
using ncclComm_t = struct ncclComm*;
constexpr ncclResult_t kNcclSuccess = 0;
constexpr ncclResult_t kNcclInProgress = 7;
constexpr int kNcclUint8 = 1;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclSum = 0;
struct ncclUniqueId {
  char internal[128];
};
// ncclConfig_t as of NCCL 2.14. Later versions grew it at the end; NCCL reads `size` and
// `version` and fills the fields an older caller does not know with defaults.
struct NcclConfig214 {
  size_t size = sizeof(NcclConfig214);
  unsigned int magic = 0xcafebeef;
  unsigned int version = 21400;
  int blocking = INT_MIN;  // NCCL_CONFIG_UNDEF_INT
  int cga_cluster_size = INT_MIN;
  int min_ctas = INT_MIN;
  int max_ctas = INT_MIN;
  const char* net_name = nullptr;
};

// NCCL's entry points; the driver's are in cuda::driver().
struct Api {
  Status nccl_status = Status::NotFound("NCCL not found (libnccl.so.2)");
  bool loaded = false;  // libnccl opened (perhaps unusable: see nccl_status)
  int version = 0;      // ncclGetVersion, e.g. 22703

  ncclResult_t (*ncclGetVersion)(int*) = nullptr;
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*ncclCommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int,
                                         NcclConfig214*) = nullptr;
  ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*ncclCommFinalize)(ncclComm_t) = nullptr;
  ncclResult_t (*ncclCommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*ncclCommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*ncclAllReduce)(const void*, void*, size_t, int, int, ncclComm_t,
                                cuda::CUstream) = nullptr;
  ncclResult_t (*ncclBroadcast)(const void*, void*, size_t, int, int, ncclComm_t,
                                cuda::CUstream) = nullptr;
  const char* (*ncclGetErrorString)(ncclResult_t) = nullptr;
  const char* (*ncclGetLastError)(ncclComm_t) = nullptr;  // optional
};

// The entry points, loaded once. REQUIRES (to call them): api().nccl_status is Ok.
const Api& api();

}  // namespace nccl
}  // namespace cairn
