// Which Launcher a coordinator uses: the local one, or — with `--peers` — a RemoteLauncher
// to the first listed agent (docs/peers.md "cairn run --peers"). No placement yet: every
// rank goes to that agent, as many at once as the run's slots.
//
// Thread-safety: call from the coordinator's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/coordinator/launcher.h"

namespace cairn {

// `peers` as --peers lists them ("host:port"); `key_file` is --key-file ("" for the usual
// lookup, peer/key_location.h). When the agent cannot be reached the launcher's start()
// fails with the reason (one line), so each trial fails to start with it.
std::unique_ptr<Launcher> make_launcher(const std::vector<std::string>& peers,
                                        const std::string& key_file);

}  // namespace cairn
