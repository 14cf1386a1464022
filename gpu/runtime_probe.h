// What GPU runtime this machine has, as cairn's own GPU code sees it. CUDA and NCCL are
// never linked into cairn: they are looked for with dlopen at run time, so the same
// executable runs on machines without them.
//
// The probe has no loader of its own: it reads gpu/cuda_driver.h's driver() and
// collective/nccl_collective.h's nccl_library() (and, when asked, gpu/cublas.h and gpu/nvrtc.h),
// the loaders the trainer and the collective use, so what `cairn doctor` calls usable is
// exactly what a trial can use: every entry point checked, not a few.
#pragma once

#include <string>

#include "common/status.h"

namespace cairn {

struct GpuRuntime {
  bool driver = false;     // libcuda.so.1 loaded (perhaps unusable: see driver_status)
  int driver_version = 0;  // e.g. 13000
  int device_count = 0;    // devices the driver sees
  // Ok when cairn's GPU code can use the driver: every entry point it needs and a device.
  Status driver_status;
  bool nccl = false;     // libnccl loaded (perhaps unusable: see nccl_status)
  int nccl_version = 0;  // e.g. 22703; also when NCCL is too old for cairn
  // Ok when cairn's collective can use NCCL: 2.14 or later, with every entry point.
  Status nccl_status;
  // What builtin:mlp's GPU path needs besides the driver; looked for only when asked:
  // loading cuBLAS and NVRTC takes tens of milliseconds, hundreds when cold, so only
  // `cairn doctor` asks (`cairn version` does not).
  bool libraries_probed = false;
  bool cublas = false;
  std::string cublas_version;  // "13.0.2"
  Status cublas_status;
  bool nvrtc = false;
  std::string nvrtc_version;  // "13.0"
  Status nvrtc_status;
  bool driver_usable() const { return driver_status.ok(); }
  bool nccl_usable() const { return nccl_status.ok(); }
  std::string describe() const;  // one line for `cairn version` / `cairn doctor`
};

// With `libraries`, also loads cuBLAS and NVRTC (and keeps them loaded).
GpuRuntime probe_gpu_runtime(bool libraries = false);

}  // namespace cairn
