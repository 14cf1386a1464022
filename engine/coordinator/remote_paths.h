// Paths on the agent (docs/peers.md "Paths on the agent"). A rank's environment names
// paths of the coordinator's machine (rank_environment.h): its control socket, the live
// workdir, the orphan directory, builtin:mlp's kernel cache, the Python SDK on PYTHONPATH.
// None of them exists on another machine. So a launch says which variables are paths of
// which kind (RemoteLaunch::paths) instead of sending their values, and the agent fills
// each with its own path of that kind, below its directory: nothing the coordinator sends
// can make the agent point a rank, or write, outside DIR.
//
//   variable             kind          on the agent
//   CAIRN_CONTROL        control       unix:DIR/control/<c>.sock, one per connection
//                                      (control_relay.h)
//   CAIRN_WORKDIR        workdir       DIR/work/<cwd> (the rank's working directory)
//   CAIRN_ORPHAN_DIR     orphans       DIR/orphans/<owner>/<trial id>/attempt-<N>
//                                      (orphan_messages.h; made only when an orphan is
//                                      asked for: make_orphan_dir)
//   CAIRN_KERNEL_CACHE   kernel_cache  DIR/cache/kernels
//   PYTHONPATH           python_sdk    DIR/sdk/<cairn version>/python, then the rest of the list
//
// Not here: CAIRN_LATEST_CHECKPOINT (checkpoint shipping) and the working directory itself
// (code shipping).
//
// Thread-safety: mark_remote_paths is pure; resolve_agent_paths may run on several
// connection threads at once (the SDK is written once per process and version, under a
// lock).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "common/status.h"
#include "peer/rank_messages.h"

namespace cairn {

// Coordinator: moves the path-valued variables of `env` out, into `paths` (name → kind).
// PYTHONPATH keeps the entries after its first, which rank_environment.cc makes the SDK's
// directory.
void mark_remote_paths(std::map<std::string, std::string>& env,
                       std::map<std::string, std::string>& paths);

// Agent (`dir` is its --dir): sets every variable of launch.paths but those of kind
// "control" (the connection's relay sets them), making the directories but the orphan
// directory (make_orphan_dir: most ranks never write an orphan). Writes the SDK
// (cairn.py and the `determined` package) under DIR/sdk/<version>/python when this process
// has not yet. An error is one line; nothing runs then.
Status resolve_agent_paths(const std::filesystem::path& dir, RemoteLaunch& launch);

// Makes a rank's CAIRN_ORPHAN_DIR (DIR/orphans/<owner>/<trial>/attempt-<N>) and marks its
// trial's directory used (agent_gc.h): before the agent asks the rank to checkpoint as an
// orphan (agent_orphans.h). An SDK makes it too when it writes an orphan.
Status make_orphan_dir(const std::filesystem::path& orphans);

// The agent's SDK directory (written when missing or different), for tests.
Result<std::filesystem::path> agent_python_sdk(const std::filesystem::path& dir);

}  // namespace cairn
