// NVRTC, the CUDA run-time compiler, loaded with dlopen (libnvrtc.so.13, .12, or unversioned)
// on first use and never linked: the builtin:mlp kernels ship as CUDA C source inside the
// binary and are compiled here for the GPU actually present, so building cairn needs no
// nvcc and no CUDA headers. NVRTC needs no GPU, so this module works (and is tested) on
// machines without one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cairn::nvrtc {

struct Info {
  Status status = Status::NotFound("NVRTC not found (libnvrtc.so.13 or .12)");
  int major = 0, minor = 0;  // nvrtcVersion
  std::vector<int> archs;    // nvrtcGetSupportedArchs, e.g. {75, 80, 86, 89, 90, 100, 120}
};

// Loads the library on first call.
const Info& info();

enum class Output { kCubin, kPtx };

// Compiles `source` (named `name` in diagnostics) for SM version `sm` (90 for 9.0): a cubin
// for exactly that architecture, or PTX for its virtual architecture (compute_90), which
// the driver compiles for any device of that version or newer. Options: -fmad=false, so
// the element-wise kernels round like the CPU path (no fused multiply-add contraction).
// Errors carry the first line of NVRTC's log; a compile error is kBadInput (it repeats on
// every try), a failure of NVRTC itself (out of memory, an internal error) kFailed: see
// compile_failure_kind. With a kernel cache directory (gpu/kernel_cache.h) an image compiled
// before is read from there (`*from_cache` set to true), and one compiled now is kept there.
Result<std::string> compile(std::string_view source, const std::string& name, int sm, Output output,
                            bool* from_cache = nullptr);

// What names compile()'s image in the kernel cache: NVRTC's version, the target, the options,
// `name` and the SHA-256 of `source`. Public for tests.
std::string cache_key(std::string_view source, const std::string& name, int sm, Output output);

// What a failed nvrtcCompileProgram means for a trial: kBadInput for
// NVRTC_ERROR_COMPILATION only (the source does not compile with this NVRTC, on any
// try); kFailed for every other result (out of memory, an internal error, a builtin
// operation failure), which a restart in a fresh process may not meet. Public for tests.
ErrorKind compile_failure_kind(int result);

// Compiles for a device of SM version `device_sm`: a cubin when NVRTC knows that
// architecture; otherwise PTX for the newest architecture NVRTC knows below it (a device
// newer than the NVRTC library), which the driver JIT-compiles when loading.
Result<std::string> compile_for_device(std::string_view source, const std::string& name,
                                       int device_sm, bool* from_cache = nullptr);

}  // namespace cairn::nvrtc
