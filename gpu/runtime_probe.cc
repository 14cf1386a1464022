#include "gpu/runtime_probe.h"

#include "gpu/cublas.h"
#include "gpu/cuda_driver.h"
#include "gpu/nccl_library.h"
#include "gpu/nvrtc.h"
#include "gpu/version_text.h"

namespace cairn {

GpuRuntime probe_gpu_runtime(bool libraries) {
  GpuRuntime rt;
  const cuda::Driver& d = cuda::driver();
  rt.driver = d.library_loaded;
  rt.driver_version = d.version;
  rt.device_count = d.device_count;
  rt.driver_status = d.status;
  const NcclLibrary nccl = nccl_library();
  rt.nccl = nccl.loaded;
  rt.nccl_version = nccl.version;
  rt.nccl_status = nccl.status;
  if (libraries) {
    rt.libraries_probed = true;
    const cublas::Info& blas = cublas::info();
    rt.cublas = blas.status.ok();
    rt.cublas_status = blas.status;
    if (rt.cublas)
      rt.cublas_version = std::to_string(blas.major) + "." + std::to_string(blas.minor) + "." +
                          std::to_string(blas.patch);
    const nvrtc::Info& rtc = nvrtc::info();
    rt.nvrtc = rtc.status.ok();
    rt.nvrtc_status = rtc.status;
    if (rt.nvrtc) rt.nvrtc_version = std::to_string(rtc.major) + "." + std::to_string(rtc.minor);
  }
  return rt;
}

std::string GpuRuntime::describe() const {
  std::string out;
  if (!driver) {
    out = "CUDA driver not found (CPU only)";
  } else if (driver_usable()) {
    out = "CUDA driver " + cuda_version_text(driver_version) + ", " + std::to_string(device_count) +
          " GPU(s)";
  } else {
    out = driver_status.message() +
          (device_count > 0 ? ", " + std::to_string(device_count) + " GPU(s)" : "") +
          " (cairn's GPU code cannot use it)";
  }
  out += nccl_usable() ? "; NCCL " + nccl_version_text(nccl_version) : "; " + nccl_status.message();
  if (libraries_probed) {
    out += cublas ? "; cuBLAS " + cublas_version : "; " + cublas_status.message();
    out += nvrtc ? "; NVRTC " + nvrtc_version : "; " + nvrtc_status.message();
  }
  return out;
}

}  // namespace cairn
