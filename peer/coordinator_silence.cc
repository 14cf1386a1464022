#include "peer/coordinator_silence.h"

#include <cstdint>
#include <cstdlib>

namespace cairn {

std::chrono::milliseconds coordinator_silence_limit() {
  // The same bounds as the coordinator's reading of the variable (remote_launcher.cc).
  if (const char* seconds = std::getenv("CAIRN_HEARTBEAT_TIMEOUT"); seconds && *seconds) {
    const double value = std::strtod(seconds, nullptr);
    if (value > 0 && value < 86400)
      return std::chrono::milliseconds(static_cast<int64_t>(value * 1000));
  }
  return std::chrono::seconds(10);
}

}  // namespace cairn
