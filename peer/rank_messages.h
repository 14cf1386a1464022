// The messages that run a rank on an agent (docs/peers.md "Running ranks"), and the checks
// an agent applies to a launch before anything is started. A rank's working directory is a
// relative path below the agent's work directory (DIR/work): never absolute, never climbing
// out with "..", so a peer cannot make the agent write outside its directory.
//
//   coordinator → agent  {"type": "launch", "rank": K, "argv": [...], "env": {...}, "cwd": "rel"}
//                        (optional: "paths": {NAME: kind}, "program": "cairn")
//                        {"type": "signal", "rank": K, "signal": N}
//   agent → coordinator  {"type": "launched", "rank": K}  or  {"type": "error", "rank": K,
//   "reason"}
//                        {"type": "output", "rank": K, "data": "..."}   (after launched, in order)
//                        or {"type": "output", "rank": K, "bytes": "<base64>"}
//                        {"type": "exit", "rank": K, "code": C, "signal": S}  (after its output)
//
// K is the coordinator's name for the rank, unique among its running ranks on that
// connection. Output arrives byte for byte: a piece that is UTF-8 travels as text ("data"),
// any other (binary output, or a character split between two pieces) as base64 ("bytes").
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace cairn {

// Bounds of a launch, far above what a trial needs, so a peer cannot make the agent build
// huge argument vectors.
inline constexpr size_t kMaxLaunchArgs = 4096;
inline constexpr size_t kMaxLaunchEnv = 4096;
// Output travels in pieces of at most this many bytes (escaped, well inside a frame).
inline constexpr size_t kOutputChunkBytes = 64 * 1024;

struct RemoteLaunch {
  int64_t rank = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string cwd;  // relative to the agent's work directory
  // Variables whose value is a path of this machine, by kind (docs/peers.md "Paths on the
  // agent"): the agent sets each to its own path of that kind, under its directory, whatever
  // `env` says (for "python_sdk", its SDK directory goes first in the list `env` holds).
  std::map<std::string, std::string> paths;
  // "program": "cairn": argv[0] names the coordinator's cairn binary (builtin:mlp); the
  // agent replaces it with its own (agent_rank_host.h), which may live at another path.
  bool self_program = false;
  // The agent's session's owner (session_open's "owner"), set by the agent, never read from
  // the launch: its orphans are kept apart from another store's (remote_paths.h).
  std::string owner;
  // Where the rank's first output byte lands in the coordinator's output file (its size when
  // the launch was sent; "output_at"): the agent numbers the rank's output from there, so a
  // `cairn resume` that adopts the rank can say from which byte it lacks it
  // (session_adoption.h KeptOutput). -1: not said (nothing is kept for the rank).
  int64_t output_at = -1;
};

// The kinds a launch's "paths" may name (anything else is refused).
inline constexpr const char* kLaunchPathKinds[] = {"control", "workdir", "orphans", "kernel_cache",
                                                   "python_sdk"};

Json launch_message(const RemoteLaunch& launch);

// An output frame carrying `bytes` exactly (see above).
Json output_message(int64_t rank, std::string_view bytes);
// The bytes of an output frame, or kBadInput with one line: neither a "data" string nor a
// "bytes" string of canonical base64 (control_frames.h), or both.
Result<std::string> output_bytes(const Json& message);

// The launch in `message`, or kBadInput with one line: a missing or mistyped field, an empty
// argv, too many entries, a variable name with '=' or NUL, a NUL in any string, or a cwd
// that is absolute, empty or climbs out with "..".
Result<RemoteLaunch> parse_launch(const Json& message);

// Agent: for a launch with self_program, argv[0] becomes this process's own executable (its
// path as /proc/self/exe names it, or /proc/self/exe itself when that file was removed or
// replaced since: the agent's own binary all the same), so builtin:mlp runs the agent's
// cairn wherever it is installed. Other launches are left as they are.
void use_own_program(RemoteLaunch& launch);

}  // namespace cairn
