// What GPU runtime this machine has. CUDA and NCCL are never linked into cairn: they are
// looked for with dlopen at run time, so the same executable runs on machines without them.
#pragma once

#include <string>

namespace cairn {

struct GpuRuntime {
  bool driver = false;     // libcuda.so.1 loaded
  int driver_version = 0;  // e.g. 13000
  int device_count = 0;
  bool nccl = false;             // libnccl.so.2 loaded
  int nccl_version = 0;          // e.g. 22703
  std::string describe() const;  // one line for `cairn version` / `cairn doctor`
};

GpuRuntime probe_gpu_runtime();

}  // namespace cairn
