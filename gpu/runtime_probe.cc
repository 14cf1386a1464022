#include "gpu/runtime_probe.h"

#include <dlfcn.h>

#include <memory>

#include "gpu/cublas.h"
#include "gpu/nvrtc.h"

namespace cairn {

namespace {

struct DlCloser {
  void operator()(void* h) const {
    if (h) ::dlclose(h);
  }
};
using Library = std::unique_ptr<void, DlCloser>;

Library open_first(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (void* h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) return Library(h);
  return Library();
}

std::string dotted(int v, int major_div, int minor_div) {
  return std::to_string(v / major_div) + "." + std::to_string((v % major_div) / minor_div);
}

}  // namespace

GpuRuntime probe_gpu_runtime(bool libraries) {
  GpuRuntime rt;
  if (Library cuda = open_first({"libcuda.so.1", "libcuda.so"})) {
    using InitFn = int (*)(unsigned);
    using VersionFn = int (*)(int*);
    using CountFn = int (*)(int*);
    auto init = reinterpret_cast<InitFn>(::dlsym(cuda.get(), "cuInit"));
    auto version = reinterpret_cast<VersionFn>(::dlsym(cuda.get(), "cuDriverGetVersion"));
    auto count = reinterpret_cast<CountFn>(::dlsym(cuda.get(), "cuDeviceGetCount"));
    rt.driver = init && version;
    if (version) version(&rt.driver_version);
    if (init && count && init(0) == 0) count(&rt.device_count);
  }
  if (Library nccl =
          open_first({"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2"})) {
    using VersionFn = int (*)(int*);
    if (auto version = reinterpret_cast<VersionFn>(::dlsym(nccl.get(), "ncclGetVersion"))) {
      rt.nccl = version(&rt.nccl_version) == 0;
    }
  }
  if (libraries) {
    rt.libraries_probed = true;
    const cublas::Info& blas = cublas::info();
    rt.cublas = blas.status.ok();
    if (rt.cublas)
      rt.cublas_version = std::to_string(blas.major) + "." + std::to_string(blas.minor) + "." +
                          std::to_string(blas.patch);
    const nvrtc::Info& rtc = nvrtc::info();
    rt.nvrtc = rtc.status.ok();
    if (rt.nvrtc) rt.nvrtc_version = std::to_string(rtc.major) + "." + std::to_string(rtc.minor);
  }
  return rt;
}

std::string GpuRuntime::describe() const {
  std::string out = driver ? "CUDA driver " + dotted(driver_version, 1000, 10) + ", " +
                                 std::to_string(device_count) + " GPU(s)"
                           : "CUDA driver not found (CPU only)";
  out += nccl ? "; NCCL " + std::to_string(nccl_version / 10000) + "." +
                    std::to_string((nccl_version % 10000) / 100) + "." +
                    std::to_string(nccl_version % 100)
              : "; NCCL not found";
  if (libraries_probed) {
    out += cublas ? "; cuBLAS " + cublas_version : "; cuBLAS not found";
    out += nvrtc ? "; NVRTC " + nvrtc_version : "; NVRTC not found";
  }
  return out;
}

}  // namespace cairn
