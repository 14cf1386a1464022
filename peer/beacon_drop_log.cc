#include "peer/beacon_drop_log.h"

namespace cairn {

namespace {

std::string held_text(int held) {
  return " (and " + std::to_string(held) + " more dropped for the same cause)";
}

}  // namespace

void BeaconDropLog::dropped(BeaconDrop drop, const std::string& from, const std::string& detail,
                            Clock::time_point now) {
  Cause& cause = causes_[static_cast<int>(drop)];
  ++cause.total;
  if (cause.logged && now - cause.last_line < interval_) {
    ++cause.held;
    return;
  }
  std::string line = "dropped a beacon from " + from + " (" + beacon_drop_name(drop) +
                     "): " + detail.substr(0, 200);
  if (cause.held > 0) line += held_text(cause.held);
  cause.held = 0;
  cause.logged = true;
  cause.last_line = now;
  if (write_) write_(line);
}

void BeaconDropLog::flush() {
  for (int i = 0; i < kBeaconDropKinds; ++i) {
    Cause& cause = causes_[i];
    if (cause.held == 0) continue;
    if (write_)
      write_(std::to_string(cause.held) + " more beacons dropped (" +
             beacon_drop_name(static_cast<BeaconDrop>(i)) + ")");
    cause.held = 0;
  }
}

}  // namespace cairn
