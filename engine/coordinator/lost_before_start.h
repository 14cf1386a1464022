// A trial's start that fails because a machine it was placed on was lost between its
// placement and its launch (docs/peers.md "Placement"): the agent's connection broke after
// schedule() chose its slots, so its launcher refuses the start. That is a machine loss like
// any other, not the trial's fault: the trial goes back to the queue and starts on other
// slots, not counted against max_restarts, and never ends ERROR for it.
//
// Thread-safety: none needed (pure functions; the coordinator's loop calls them).
#pragma once

#include <functional>
#include <vector>

#include "engine/coordinator/slot_pool.h"

namespace cairn {

// The machines among `places` that `lost` says are lost, each once, in rank order.
std::vector<int> lost_machines(const std::vector<SlotRef>& places,
                               const std::function<bool(int)>& lost);

// Test hook (tests/README.md "Test hooks"): with CAIRN_TEST_LOSE_BEFORE_START=1 in the
// environment, the first time a trial is about to launch with a rank on an agent, `say` is
// called with the machine of its last rank, and this waits (at most 60 s) until `lost` says
// that machine is lost, so a test can kill the agent in the gap between placement and
// launch. Once per process; nothing else reads the variable.
void wait_for_loss_if_testing(const std::vector<SlotRef>& places,
                              const std::function<bool(int)>& lost,
                              const std::function<void(int)>& say);

}  // namespace cairn
