// The agent's RankHost (peer/rank_host.h): runs a connection's ranks as processes of this
// machine, like the local launcher does (trial_process.h: no shell, own process group,
// output appended to a file), under the agent's directory: the working directory is
// DIR/work/<cwd> (made when missing), the output file DIR/ranks/<connection>-<rank>.out,
// which poll() follows and hands out in pieces. Exits are collected with waitpid on each
// rank's own pid, never on any child, so hosts of several connections do not take each
// other's exits.
//
// Thread-safety: one connection thread uses a host; hosts of different connections may run
// at once.
#pragma once

#include <filesystem>
#include <memory>

#include "peer/rank_host.h"

namespace cairn {

// `dir` is the agent's --dir; each host gets a number unique in this process for its files.
std::unique_ptr<RankHost> make_agent_rank_host(const std::filesystem::path& dir);

}  // namespace cairn
