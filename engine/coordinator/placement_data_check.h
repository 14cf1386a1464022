// Placement's question to an agent before a trial is first placed there (docs/peers.md
// "Code and data on a peer"): does it have the data the experiment cannot ship — data too
// large to keep, or outside the workdir — at the same path, with the recorded fingerprint?
// Asked once per experiment and agent connection, on a thread of its own, from the moment
// the run's source is known (Launcher::prepare), so the answer is usually there when the
// first trial is placed; RemoteLauncher::check_run() takes it.
//
// Thread-safety: start_data_check may be called from any thread; the future is its
// caller's.
#pragma once

#include <chrono>
#include <future>
#include <memory>

#include "common/status.h"
#include "engine/coordinator/run_shipping.h"
#include "peer/checkpoint_client.h"

namespace cairn {

// How long the question may take, the agent's fingerprinting of the data included (cached
// by size and time after the first). Past it the answer is unknown (Io) and the first start
// there finds out, as before: it also bounds how long a coordinator that stops waits for it.
inline constexpr std::chrono::seconds kDataCheckTimeout{60};

// The agent's answer to data_check for `source` (check_data_on_agent: Ok, Failed with its
// one line, Io when unknown), computed on a thread of its own. An empty future (valid()
// false) when there is nothing to ask: no source, or no data that must already be there
// (stored data travels with the run).
std::future<Status> start_data_check(const AgentEndpoint& agent,
                                     std::shared_ptr<const RunSource> source);

}  // namespace cairn
