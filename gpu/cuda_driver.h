// The CUDA driver API, loaded at run time: libcuda.so.1 is opened with dlopen on first use
// and never linked, so cairn builds without a CUDA toolkit and runs where there is no GPU.
// The few types and entry points used are declared here (cuda.h's stable ABI, the _v2
// entry points) rather than taken from cuda.h, which CI machines do not have.
//
// The driver API stands in for cudart: it is present wherever a GPU driver is, cudart is
// not. Everything GPU in cairn (collective/nccl_collective.cc, the builtin:mlp CUDA path) goes
// through cuda_driver(), so the library is loaded once per process.
//
// Also here: RAII owners for the driver's handles. None of them throws; errors come back as
// Status with a one-line message naming the driver call. Destructors make the owning
// context current first, so they may run on any thread of the process.
//
// NOTE: written on a machine without a GPU; it has run against tests/fake_cuda's host
// emulation of the driver, not yet against a real driver and device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace cairn::cuda {

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUdeviceptr = unsigned long long;
constexpr CUresult kSuccess = 0;
constexpr CUresult kErrorOutOfMemory = 2;
constexpr CUresult kErrorStubLibrary = 34;
constexpr CUresult kErrorInsufficientDriver = 35;
constexpr CUresult kErrorNoDevice = 100;
constexpr CUresult kErrorInvalidImage = 200;
constexpr CUresult kErrorNoBinaryForGpu = 209;
constexpr CUresult kErrorInvalidPtx = 218;
constexpr CUresult kErrorJitCompilerNotFound = 221;
constexpr CUresult kErrorUnsupportedPtxVersion = 222;
constexpr CUresult kErrorNotFound = 500;
constexpr CUresult kErrorNotReady = 600;
constexpr CUresult kErrorCompatNotSupportedOnDevice = 804;
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDisableTiming = 0x2;
// CUdevice_attribute values used here.
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

struct Driver {
  // Ok when the library loaded, has every entry point and sees at least one device;
  // otherwise one line naming what is missing (the library, an entry point, a device), as
  // kNotFound, or as kFailed when cuInit failed for a reason a later process may not meet
  // (init_error_kind). The one check of the driver in cairn: the trainer, NCCL and `cairn
  // doctor` / `cairn version` (gpu/runtime_probe.h) all read it.
  Status status = Status::NotFound("CUDA driver not found (libcuda.so.1)");
  bool library_loaded = false;
  int version = 0;  // cuDriverGetVersion, e.g. 13000; also when status is not ok
  // Devices the driver sees; also when status is not ok because an entry point cairn
  // needs is missing (trials that bring their own CUDA can still use them).
  int device_count = 0;

  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventQuery)(CUevent) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemGetInfo)(size_t*, size_t*) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
};

// Loaded once, on first call, and never unloaded (NCCL keeps threads that call into it).
const Driver& driver();

// dlopen of a library shipped once per CUDA major version (cuBLAS, NVRTC: stem "cublas",
// "nvrtc"): the version matching the driver first, since a CUDA 13 library needs a CUDA 13
// driver and a cubin from a newer NVRTC may not load on an older one (without a driver, as
// in the tests, the newest first); then the other, the unversioned name, and the toolkit's
// default place. nullptr when none loads. Never closed (gpu/shared_library.h).
void* open_per_cuda_version(const char* stem);

// "CUDA <what>: <the driver's text for r>", as kFailed.
Status error(const char* what, CUresult r);

// What a failed cuModuleLoadData means for a trial. kBadInput only where the image itself
// is refused, which repeats on every restart with the same driver and GPU: an invalid
// image (200), no binary for this GPU (209), invalid PTX (218), no JIT compiler (221), PTX
// newer than the driver (222). kFailed for the rest, which a fresh process may not meet:
// out of memory, an uninitialised or deinitialised driver, an ECC error, a system not
// ready, an unknown error. An allowlist, so that an error new to cairn is retried.
ErrorKind module_error_kind(CUresult r);

// What a failed cuInit means for a trial. kNotFound only where the failure repeats in every
// process on this machine until someone changes it: no device (100), a driver older than
// the CUDA it was asked for (35), the toolkit's stub libcuda instead of a driver (34), a
// forward-compatibility driver this GPU does not support (804). kFailed for the rest (a
// system not ready (802), out of memory (2), an unknown error (999)), so that a trial is
// retried rather than ended: an allowlist, as module_error_kind.
ErrorKind init_error_kind(CUresult r);

// Compute capability of device `ordinal`, e.g. {9, 0}.
struct ComputeCapability {
  int major = 0;
  int minor = 0;
  int sm() const { return major * 10 + minor; }  // 90
};

// The device's primary context, retained for the owner's lifetime: what cudart would use,
// so memory allocated here is usable by NCCL and cuBLAS in the same process.
class Context {
 public:
  static Result<Context> retain(int ordinal);
  Context() = default;
  Context(Context&& other) noexcept { *this = std::move(other); }
  Context& operator=(Context&& other) noexcept;
  ~Context();

  // Makes this context current on the calling thread. Every call into the driver, cuBLAS
  // or NCCL for this device is preceded by one (cheap when it already is).
  Status make_current() const;
  CUcontext get() const { return context_; }
  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }
  ComputeCapability capability() const { return capability_; }
  int multiprocessors() const { return multiprocessors_; }

 private:
  void reset();
  int ordinal_ = -1;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string name_;
  ComputeCapability capability_;
  int multiprocessors_ = 0;
};

// Device memory. The context it was allocated in must outlive it.
class DeviceMemory {
 public:
  static Result<DeviceMemory> allocate(const Context& context, size_t bytes);
  DeviceMemory() = default;
  DeviceMemory(DeviceMemory&& other) noexcept { *this = std::move(other); }
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  ~DeviceMemory();

  CUdeviceptr address() const { return ptr_; }
  float* floats() const { return reinterpret_cast<float*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void reset();
  CUcontext context_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

class Stream {
 public:
  static Result<Stream> create(const Context& context);  // non-blocking
  Stream() = default;
  Stream(Stream&& other) noexcept { *this = std::move(other); }
  Stream& operator=(Stream&& other) noexcept;
  ~Stream();

  CUstream get() const { return stream_; }
  Status synchronize() const;

 private:
  void reset();
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
};

// A loaded module (cubin or PTX image) and lookups into it. load() is kBadInput when the
// driver refuses the image itself (module_error_kind), kFailed for anything else;
// function() is kBadInput when the image lacks the kernel (CUDA_ERROR_NOT_FOUND).
class Module {
 public:
  static Result<Module> load(const Context& context, const std::string& image);
  Module() = default;
  Module(Module&& other) noexcept { *this = std::move(other); }
  Module& operator=(Module&& other) noexcept;
  ~Module();

  Result<CUfunction> function(const char* name) const;

 private:
  void reset();
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
};

}  // namespace cairn::cuda
