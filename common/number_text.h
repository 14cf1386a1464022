// Numbers as people read them in cairn's output.
#pragma once

#include <cstdio>
#include <string>

namespace cairn {

// A metric value for humans: up to 6 significant digits (the store and --json keep every
// digit).
inline std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace cairn
