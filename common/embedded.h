// Text files compiled into the binary (see CAIRN_EMBEDDED in CMakeLists.txt).
#pragma once

#include <span>
#include <string_view>

namespace cairn {
extern const std::string_view kPythonSdkSource;
extern const std::string_view kBashCompletion;
extern const std::string_view kZshCompletion;
extern const std::string_view kFishCompletion;
extern const std::string_view kMlpCudaKernels;  // trainer/mlp_cuda_kernels.cu

// One file of an embedded tree: its path relative to the tree's parent, and its text.
struct EmbeddedFile {
  std::string_view path;
  std::string_view content;
};
// sdk/python/determined/**.py, paths "determined/…" (docs/determined.md): written beside
// the Python SDK, so that `import determined` in a trial finds cairn's implementation.
extern const std::span<const EmbeddedFile> kDeterminedPackage;
}  // namespace cairn
