#include "engine/coordinator/lost_before_start.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace cairn {

std::vector<int> lost_machines(const std::vector<SlotRef>& places,
                               const std::function<bool(int)>& lost) {
  std::vector<int> out;
  for (const SlotRef& place : places)
    if (std::find(out.begin(), out.end(), place.machine) == out.end() && lost(place.machine))
      out.push_back(place.machine);
  return out;
}

void wait_for_loss_if_testing(const std::vector<SlotRef>& places,
                              const std::function<bool(int)>& lost,
                              const std::function<void(int)>& say) {
  static bool done = false;
  const char* asked = std::getenv("CAIRN_TEST_LOSE_BEFORE_START");
  if (done || !asked || std::strcmp(asked, "1") != 0 || places.empty() ||
      places.back().machine == 0)
    return;
  done = true;
  const int machine = places.back().machine;
  say(machine);
  // The launcher's own thread notices the loss (its heartbeat timeout); this only waits.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!lost(machine) && std::chrono::steady_clock::now() < give_up) ::poll(nullptr, 0, 20);
}

}  // namespace cairn
