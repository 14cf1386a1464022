// Rate-limited lines about dropped beacons: anyone on the LAN can send datagrams, so a
// flood of forged or malformed ones must not become a flood of log lines. Each cause
// (beacon.h's BeaconDrop) gets at most one line per interval; the drops it held back are
// counted in its next line, or in flush().
//
// Thread-safety: used from one thread.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <string>

#include "peer/beacon.h"

namespace cairn {

class BeaconDropLog {
 public:
  using Clock = std::chrono::steady_clock;
  BeaconDropLog(std::function<void(const std::string&)> write, Clock::duration interval)
      : write_(std::move(write)), interval_(interval) {}

  // A datagram from `from` ("10.0.0.5:41234") was dropped for `drop`, `detail` saying why.
  void dropped(BeaconDrop drop, const std::string& from, const std::string& detail,
               Clock::time_point now = Clock::now());
  // Writes one line per cause with drops held back since its last line.
  void flush();

  // Drops of each cause so far, logged or not.
  int count(BeaconDrop drop) const { return causes_[static_cast<int>(drop)].total; }

 private:
  struct Cause {
    Clock::time_point last_line{};
    bool logged = false;
    int held = 0;
    int total = 0;
  };
  std::function<void(const std::string&)> write_;
  Clock::duration interval_;
  std::array<Cause, kBeaconDropKinds> causes_{};
};

}  // namespace cairn
