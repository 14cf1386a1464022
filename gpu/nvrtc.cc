#include "gpu/nvrtc.h"

#include "gpu/shared_library.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "common/sha256.h"
#include "gpu/cuda_driver.h"
#include "gpu/kernel_cache.h"

namespace cairn::nvrtc {
namespace {

// The slice of nvrtc.h used here; its ABI has been stable since CUDA 11.
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;
constexpr nvrtcResult kSuccess = 0;
constexpr nvrtcResult kErrorCompilation = 6;  // NVRTC_ERROR_COMPILATION

struct Api {
  nvrtcResult (*nvrtcVersion)(int*, int*) = nullptr;
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*) = nullptr;
  nvrtcResult (*nvrtcGetSupportedArchs)(int*) = nullptr;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int,
                                    const char* const*, const char* const*) = nullptr;
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*) = nullptr;
  const char* (*nvrtcGetErrorString)(nvrtcResult) = nullptr;
  Info info;
};

Api load() {
  Api a;
  void* lib = cuda::open_per_cuda_version("nvrtc");
  if (!lib) return a;
  gpu_lib::Binder bind(lib);
  bind("nvrtcVersion", a.nvrtcVersion);
  bind("nvrtcGetNumSupportedArchs", a.nvrtcGetNumSupportedArchs);
  bind("nvrtcGetSupportedArchs", a.nvrtcGetSupportedArchs);
  bind("nvrtcCreateProgram", a.nvrtcCreateProgram);
  bind("nvrtcDestroyProgram", a.nvrtcDestroyProgram);
  bind("nvrtcCompileProgram", a.nvrtcCompileProgram);
  bind("nvrtcGetProgramLogSize", a.nvrtcGetProgramLogSize);
  bind("nvrtcGetProgramLog", a.nvrtcGetProgramLog);
  bind("nvrtcGetPTXSize", a.nvrtcGetPTXSize);
  bind("nvrtcGetPTX", a.nvrtcGetPTX);
  bind("nvrtcGetCUBINSize", a.nvrtcGetCUBINSize);
  bind("nvrtcGetCUBIN", a.nvrtcGetCUBIN);
  bind("nvrtcGetErrorString", a.nvrtcGetErrorString);
  if (!bind.ok()) {
    a.info.status = Status::NotFound(std::string("NVRTC too old (it lacks ") + bind.missing() +
                                     "; CUDA 11.2+ needed)");
    return a;
  }
  a.nvrtcVersion(&a.info.major, &a.info.minor);
  int count = 0;
  if (a.nvrtcGetNumSupportedArchs(&count) == kSuccess && count > 0) {
    a.info.archs.resize(static_cast<size_t>(count));
    if (a.nvrtcGetSupportedArchs(a.info.archs.data()) != kSuccess) a.info.archs.clear();
  }
  a.info.status = Status::Ok();
  return a;
}

const Api& api() {
  static const Api instance = load();
  return instance;
}

Status nvrtc_error(const char* what, nvrtcResult r) {
  return Status::Failed(std::string("NVRTC ") + what + ": " + api().nvrtcGetErrorString(r));
}

// Destroys the program on every path out of compile().
struct ProgramGuard {
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program) api().nvrtcDestroyProgram(&program);
  }
};

std::string first_error_line(const std::string& log) {
  // The log lists warnings too; the first line that says "error" explains the failure.
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(start, end - start);
    if (line.find("error") != std::string::npos) return line;
    start = end + 1;
  }
  return log.substr(0, log.find('\n'));
}

}  // namespace

const Info& info() {
  return api().info;
}

ErrorKind compile_failure_kind(int result) {
  return result == kErrorCompilation ? ErrorKind::kBadInput : ErrorKind::kFailed;
}

namespace {

// The options every compile uses: -fmad=false so that the element-wise kernels round like
// the CPU path (no fused multiply-add contraction).
std::string architecture_option(int sm, Output output) {
  return std::string("--gpu-architecture=") + (output == Output::kCubin ? "sm_" : "compute_") +
         std::to_string(sm);
}
constexpr const char* kFixedOptions[] = {"--fmad=false", "--std=c++17"};

Result<std::string> compile_now(std::string_view source, const std::string& name, int sm,
                                Output output) {
  const Api& a = api();
  const std::string text(source);  // NVRTC wants a NUL-terminated string
  ProgramGuard guard;
  nvrtcResult r =
      a.nvrtcCreateProgram(&guard.program, text.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (r != kSuccess) {
    guard.program = nullptr;
    return nvrtc_error("nvrtcCreateProgram", r);
  }
  const std::string arch = architecture_option(sm, output);
  const char* options[] = {arch.c_str(), kFixedOptions[0], kFixedOptions[1]};
  r = a.nvrtcCompileProgram(guard.program, 3, options);
  if (r != kSuccess && compile_failure_kind(r) == ErrorKind::kFailed)
    return nvrtc_error("nvrtcCompileProgram", r);  // NVRTC itself failed: it may not again
  if (r != kSuccess) {
    size_t log_size = 0;
    std::string log;
    if (a.nvrtcGetProgramLogSize(guard.program, &log_size) == kSuccess && log_size > 1) {
      log.resize(log_size);
      a.nvrtcGetProgramLog(guard.program, log.data());
      log.resize(log_size - 1);
    }
    // kBadInput: the same source fails the same way with this NVRTC every time, so a trial
    // that meets it must not be restarted.
    return Status::BadInput("NVRTC: compiling " + name + " for " + arch.substr(19) + " failed: " +
                            (log.empty() ? a.nvrtcGetErrorString(r) : first_error_line(log)));
  }
  size_t size = 0;
  std::string image;
  if (output == Output::kCubin) {
    if ((r = a.nvrtcGetCUBINSize(guard.program, &size)) != kSuccess)
      return nvrtc_error("nvrtcGetCUBINSize", r);
    image.resize(size);
    if ((r = a.nvrtcGetCUBIN(guard.program, image.data())) != kSuccess)
      return nvrtc_error("nvrtcGetCUBIN", r);
  } else {
    if ((r = a.nvrtcGetPTXSize(guard.program, &size)) != kSuccess)
      return nvrtc_error("nvrtcGetPTXSize", r);
    image.resize(size);  // includes the terminating NUL, which cuModuleLoadData needs
    if ((r = a.nvrtcGetPTX(guard.program, image.data())) != kSuccess)
      return nvrtc_error("nvrtcGetPTX", r);
  }
  return image;
}

}  // namespace

std::string cache_key(std::string_view source, const std::string& name, int sm, Output output) {
  std::string key = "cairn kernels 1; NVRTC " + std::to_string(info().major) + "." +
                    std::to_string(info().minor) + "; " + architecture_option(sm, output);
  for (const char* option : kFixedOptions) key += std::string(" ") + option;
  return key + "; " + name + " " + sha256_hex(source);
}

Result<std::string> compile(std::string_view source, const std::string& name, int sm, Output output,
                            bool* from_cache) {
  if (from_cache) *from_cache = false;
  if (!info().status.ok()) return info().status;
  const std::filesystem::path cache = kernel_cache::directory();
  if (cache.empty()) return compile_now(source, name, sm, output);
  const std::string key = cache_key(source, name, sm, output);
  std::string problem;
  if (auto cached = kernel_cache::load(cache, key, &problem)) {
    if (from_cache) *from_cache = true;
    return std::move(*cached);
  }
  // Printed by the trial into its log: a damaged cache is worth knowing about, and costs
  // only this compile.
  if (!problem.empty()) std::fprintf(stderr, "cairn: warning: %s\n", problem.c_str());
  auto image = compile_now(source, name, sm, output);
  if (image.ok()) kernel_cache::save(cache, key, *image);
  return image;
}

Result<std::string> compile_for_device(std::string_view source, const std::string& name,
                                       int device_sm, bool* from_cache) {
  const Info& i = info();
  if (!i.status.ok()) return i.status;
  if (i.archs.empty() || std::find(i.archs.begin(), i.archs.end(), device_sm) != i.archs.end())
    return compile(source, name, device_sm, Output::kCubin, from_cache);
  int best = 0;
  for (int arch : i.archs)
    if (arch < device_sm) best = std::max(best, arch);
  if (best == 0) {
    return Status::NotFound("NVRTC " + std::to_string(i.major) + "." + std::to_string(i.minor) +
                            " cannot compile for sm_" + std::to_string(device_sm) +
                            " (its oldest architecture is sm_" + std::to_string(i.archs.front()) +
                            ")");
  }
  return compile(source, name, best, Output::kPtx, from_cache);
}

}  // namespace cairn::nvrtc
