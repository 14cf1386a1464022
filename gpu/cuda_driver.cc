#include "gpu/cuda_driver.h"

#include "gpu/shared_library.h"
#include "gpu/version_text.h"

#include <initializer_list>
#include <string>
#include <utility>

namespace cairn::cuda {
namespace {

Driver load() {
  Driver d;
  void* lib = gpu_lib::open_first({"libcuda.so.1", "libcuda.so"});
  if (!lib) return d;
  d.library_loaded = true;
  gpu_lib::Binder bind(lib);
  bind("cuInit", d.cuInit);
  bind("cuDriverGetVersion", d.cuDriverGetVersion);
  bind("cuDeviceGetCount", d.cuDeviceGetCount);
  bind("cuDeviceGet", d.cuDeviceGet);
  bind("cuDeviceGetAttribute", d.cuDeviceGetAttribute);
  bind("cuDeviceGetName", d.cuDeviceGetName);
  bind("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain);
  bind("cuDevicePrimaryCtxRelease_v2", d.cuDevicePrimaryCtxRelease);
  bind("cuCtxSetCurrent", d.cuCtxSetCurrent);
  bind("cuStreamCreate", d.cuStreamCreate);
  bind("cuStreamDestroy_v2", d.cuStreamDestroy);
  bind("cuStreamSynchronize", d.cuStreamSynchronize);
  bind("cuEventCreate", d.cuEventCreate);
  bind("cuEventRecord", d.cuEventRecord);
  bind("cuEventQuery", d.cuEventQuery);
  bind("cuEventDestroy_v2", d.cuEventDestroy);
  bind("cuMemAlloc_v2", d.cuMemAlloc);
  bind("cuMemFree_v2", d.cuMemFree);
  bind("cuMemGetInfo_v2", d.cuMemGetInfo);
  bind("cuMemcpyHtoD_v2", d.cuMemcpyHtoD);
  bind("cuMemcpyDtoH_v2", d.cuMemcpyDtoH);
  bind("cuMemcpyHtoDAsync_v2", d.cuMemcpyHtoDAsync);
  bind("cuMemcpyDtoHAsync_v2", d.cuMemcpyDtoHAsync);
  bind("cuMemsetD32Async", d.cuMemsetD32Async);
  bind("cuModuleLoadData", d.cuModuleLoadData);
  bind("cuModuleUnload", d.cuModuleUnload);
  bind("cuModuleGetFunction", d.cuModuleGetFunction);
  bind("cuLaunchKernel", d.cuLaunchKernel);
  bind("cuGetErrorString", d.cuGetErrorString);
  // Version and devices are read even from a driver cairn cannot use, so that `cairn doctor`
  // can say which driver it is and the coordinator still counts the GPUs for trials that
  // bring their own CUDA (PyTorch).
  if (d.cuDriverGetVersion) d.cuDriverGetVersion(&d.version);
  CUresult init = -1;
  if (d.cuInit && d.cuDeviceGetCount && (init = d.cuInit(0)) == kSuccess &&
      d.cuDeviceGetCount(&d.device_count) != kSuccess)
    d.device_count = 0;
  const std::string which = "CUDA driver " + cuda_version_text(d.version);
  if (!bind.ok()) {
    d.status = Status::NotFound(which + " is too old for cairn (it lacks " + bind.missing() + ")");
    return d;
  }
  // No device is how most drivers answer where the GPUs are hidden (CUDA_VISIBLE_DEVICES
  // empty) or absent: said as plainly as a count of zero, not as a failed call.
  if (init != kSuccess && init != kErrorNoDevice) {
    const char* text = nullptr;
    d.cuGetErrorString(init, &text);
    std::string line =
        which + " found but cuInit failed: " + (text ? text : "error " + std::to_string(init));
    d.status = init_error_kind(init) == ErrorKind::kNotFound ? Status::NotFound(std::move(line))
                                                             : Status::Failed(std::move(line));
    return d;
  }
  if (d.device_count == 0) {
    d.status = Status::NotFound(which + " found but no CUDA device");
    return d;
  }
  d.status = Status::Ok();
  return d;
}

// Destructors cannot report; they make the owning context current and ignore the result
// (a failure there means the context is already gone with the process's CUDA state).
void make_current(CUcontext context) {
  if (context) driver().cuCtxSetCurrent(context);
}

}  // namespace

const Driver& driver() {
  static const Driver instance = load();
  return instance;
}

ErrorKind init_error_kind(CUresult r) {
  switch (r) {
    case kErrorNoDevice:
    case kErrorInsufficientDriver:
    case kErrorStubLibrary:
    case kErrorCompatNotSupportedOnDevice:
      return ErrorKind::kNotFound;
    default:
      return ErrorKind::kFailed;
  }
}

Status error(const char* what, CUresult r) {
  const char* text = nullptr;
  if (driver().cuGetErrorString) driver().cuGetErrorString(r, &text);
  return Status::Failed(std::string("CUDA ") + what + ": " +
                        (text ? text : "error " + std::to_string(r)));
}

// --- Context ---

Result<Context> Context::retain(int ordinal) {
  const Driver& d = driver();
  if (!d.status.ok()) return d.status;
  if (ordinal < 0 || ordinal >= d.device_count)
    return Status::BadInput("no CUDA device " + std::to_string(ordinal) + " (" +
                            std::to_string(d.device_count) + " visible)");
  Context c;
  CUresult r = d.cuDeviceGet(&c.device_, ordinal);
  if (r != kSuccess) return error("cuDeviceGet", r);
  if ((r = d.cuDevicePrimaryCtxRetain(&c.context_, c.device_)) != kSuccess) {
    c.context_ = nullptr;
    return error("cuDevicePrimaryCtxRetain", r);
  }
  c.ordinal_ = ordinal;
  char name[256] = {};
  if (d.cuDeviceGetName(name, sizeof(name) - 1, c.device_) == kSuccess) c.name_ = name;
  d.cuDeviceGetAttribute(&c.capability_.major, kAttrComputeCapabilityMajor, c.device_);
  d.cuDeviceGetAttribute(&c.capability_.minor, kAttrComputeCapabilityMinor, c.device_);
  d.cuDeviceGetAttribute(&c.multiprocessors_, kAttrMultiprocessorCount, c.device_);
  if (Status st = c.make_current(); !st.ok()) return st;
  return c;
}

Context& Context::operator=(Context&& other) noexcept {
  if (this != &other) {
    reset();
    ordinal_ = std::exchange(other.ordinal_, -1);
    device_ = other.device_;
    context_ = std::exchange(other.context_, nullptr);
    name_ = std::move(other.name_);
    capability_ = other.capability_;
    multiprocessors_ = other.multiprocessors_;
  }
  return *this;
}

Context::~Context() {
  reset();
}

void Context::reset() {
  if (context_) driver().cuDevicePrimaryCtxRelease(device_);
  context_ = nullptr;
}

Status Context::make_current() const {
  const CUresult r = driver().cuCtxSetCurrent(context_);
  return r == kSuccess ? Status::Ok() : error("cuCtxSetCurrent", r);
}

// --- DeviceMemory ---

Result<DeviceMemory> DeviceMemory::allocate(const Context& context, size_t bytes) {
  if (Status st = context.make_current(); !st.ok()) return st;
  DeviceMemory m;
  // Zero bytes still get an address, so that every buffer can be passed to a kernel.
  const CUresult r = driver().cuMemAlloc(&m.ptr_, bytes == 0 ? 4 : bytes);
  if (r != kSuccess) {
    m.ptr_ = 0;
    return error(("cuMemAlloc of " + std::to_string(bytes) + " bytes").c_str(), r);
  }
  m.context_ = context.get();
  m.bytes_ = bytes;
  return m;
}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceMemory::~DeviceMemory() {
  reset();
}

void DeviceMemory::reset() {
  if (ptr_) {
    make_current(context_);
    driver().cuMemFree(ptr_);
  }
  ptr_ = 0;
}

// --- Stream ---

Result<Stream> Stream::create(const Context& context) {
  if (Status st = context.make_current(); !st.ok()) return st;
  Stream s;
  const CUresult r = driver().cuStreamCreate(&s.stream_, kStreamNonBlocking);
  if (r != kSuccess) {
    s.stream_ = nullptr;
    return error("cuStreamCreate", r);
  }
  s.context_ = context.get();
  return s;
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Stream::~Stream() {
  reset();
}

void Stream::reset() {
  if (stream_) {
    make_current(context_);
    driver().cuStreamDestroy(stream_);
  }
  stream_ = nullptr;
}

Status Stream::synchronize() const {
  make_current(context_);
  const CUresult r = driver().cuStreamSynchronize(stream_);
  return r == kSuccess ? Status::Ok() : error("cuStreamSynchronize", r);
}

// --- Module ---

Result<Module> Module::load(const Context& context, const std::string& image) {
  if (Status st = context.make_current(); !st.ok()) return st;
  Module m;
  const CUresult r = driver().cuModuleLoadData(&m.module_, image.c_str());
  if (r != kSuccess) {
    m.module_ = nullptr;
    const Status st = error("cuModuleLoadData", r);
    if (module_error_kind(r) == ErrorKind::kFailed) return st;
    return Status::BadInput(st.message() + " (the driver refuses the module)");
  }
  m.context_ = context.get();
  return m;
}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

Module::~Module() {
  reset();
}

void Module::reset() {
  if (module_) {
    make_current(context_);
    driver().cuModuleUnload(module_);
  }
  module_ = nullptr;
}

Result<CUfunction> Module::function(const char* name) const {
  CUfunction f = nullptr;
  const CUresult r = driver().cuModuleGetFunction(&f, module_, name);
  if (r == kSuccess) return f;
  const Status st = error((std::string("cuModuleGetFunction ") + name).c_str(), r);
  // Not found: the image lacks the kernel, and will on every try.
  return r == kErrorNotFound ? Status::BadInput(st.message()) : st;
}

ErrorKind module_error_kind(CUresult r) {
  switch (r) {
    case kErrorInvalidImage:
    case kErrorNoBinaryForGpu:
    case kErrorInvalidPtx:
    case kErrorJitCompilerNotFound:
    case kErrorUnsupportedPtxVersion:
      return ErrorKind::kBadInput;
    default:
      return ErrorKind::kFailed;
  }
}

void* open_per_cuda_version(const char* stem) {
  const Driver& d = driver();
  const bool cuda12 = d.library_loaded && d.version > 0 && d.version < 13000;
  const std::string lib = std::string("lib") + stem + ".so";
  const std::string v12 = lib + ".12", v13 = lib + ".13", toolkit = "/usr/local/cuda/lib64/" + lib;
  return gpu_lib::open_first(
      {(cuda12 ? v12 : v13).c_str(), (cuda12 ? v13 : v12).c_str(), lib.c_str(), toolkit.c_str()});
}

}  // namespace cairn::cuda
