// Text files compiled into the binary (see CAIRN_EMBEDDED in CMakeLists.txt).
#pragma once

#include <string_view>

namespace cairn {
extern const std::string_view kPythonSdkSource;
extern const std::string_view kBashCompletion;
extern const std::string_view kZshCompletion;
extern const std::string_view kFishCompletion;
extern const std::string_view kMlpCudaKernels;  // trainer/mlp_cuda_kernels.cu
}  // namespace cairn
