// The agent's side of code and data shipping (run_shipping.h has the exchange; docs/peers.md
// "Code and data on a peer"): the handler the agent server hands every request type it does
// not know itself. Under the agent's DIR it keeps
//   code-cache.git/     the git objects received (a bare repository: packs only)
//   code/<tree>/        one read-only checkout per tree, made once
//   data/<sha256>       data files received by content, verified against their hash
//   work/runs/<run>/    a run directory: a writable copy of a checkout, with the data
//                       files and links of one experiment (what its ranks' cwd is)
// and nothing is written outside DIR. Every shipment is one log line:
//   received code <tree> from ADDRESS: N objects, B bytes
//   received data <sha256> from ADDRESS: B bytes
//   prepared run <run> for ADDRESS: code <tree>, N data files, M data links   (or: already here)
//   refused … from ADDRESS: <why>
//
// Thread-safety: the handler is called from every connection's thread; what changes the
// cache (indexing a pack, a checkout, a run directory) is serialised by one lock.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>

#include "peer/agent_server.h"

namespace cairn {

// `refusal`, when not empty, is the answer to every shipping request (a keyless agent runs
// nothing, so it takes nothing either); the bytes that follow a request are still read.
AgentRequestHandler make_shipping_handler(const std::filesystem::path& dir,
                                          std::string refusal = {});

// The agent's check of data it must already have (also a data_check request): Ok, or
// Failed with one line naming what is missing or different, e.g. "data /srv/d is not what
// the experiment recorded: 1 changed (/srv/d/train.csv)".
// `check` is {"entries": [absolute paths], "files": [{"path", "sha256", "size"}]}.
Status check_agent_data(const std::filesystem::path& dir, const Json& check);

// The lock that serialises changes to the cache, the data store and the run directories;
// the agent's garbage collection (agent_gc.h) holds it while it takes entries away.
std::mutex& agent_shipping_lock();

}  // namespace cairn
