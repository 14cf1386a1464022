// What GPU runtime this machine has. CUDA and NCCL are never linked into cairn: they are
// looked for with dlopen at run time, so the same executable runs on machines without them.
#pragma once

#include <string>

namespace cairn {

struct GpuRuntime {
  bool driver = false;     // libcuda.so.1 loaded
  int driver_version = 0;  // e.g. 13000
  int device_count = 0;
  bool nccl = false;     // libnccl.so.2 loaded
  int nccl_version = 0;  // e.g. 22703
  // What builtin:mlp's GPU path needs besides the driver; looked for only when asked
  // (loading cuBLAS takes tens of milliseconds, hundreds when cold).
  bool libraries_probed = false;
  bool cublas = false;
  std::string cublas_version;  // "13.0.2"
  bool nvrtc = false;
  std::string nvrtc_version;     // "13.0"
  std::string describe() const;  // one line for `cairn version` / `cairn doctor`
};

// With `libraries`, also loads cuBLAS and NVRTC (and keeps them loaded).
GpuRuntime probe_gpu_runtime(bool libraries = false);

}  // namespace cairn
