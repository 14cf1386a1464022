// The GPU libraries' version numbers as people write them, in one place, so that
// `cairn version`, `cairn doctor` and the errors of the loaders print them alike.
#pragma once

#include <string>

namespace cairn {

// cuDriverGetVersion's 13000 → "13.0", 12080 → "12.8".
inline std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// ncclGetVersion's 22809 → "2.28.9". NCCL before 2.9 packed a two-digit minor and patch
// into four digits (2804 → "2.8.4"); 2.9 onwards uses MAJOR*10000 + MINOR*100 + PATCH.
inline std::string nccl_version_text(int v) {
  const int major_unit = v >= 10000 ? 10000 : 1000;
  return std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / 100) + "." +
         std::to_string(v % 100);
}

}  // namespace cairn
