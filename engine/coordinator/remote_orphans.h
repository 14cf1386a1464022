// Orphan checkpoints on agents (docs/peers.md "Orphans on an agent"): a rank on an agent whose
// coordinator did not come back checkpoints into DIR/orphans/<owner>/<trial id>/attempt-<N>/<step>/
// (N its CAIRN_ATTEMPT, which the agent puts in the path: the SDK cannot name another) and exits
// (peer/agent_orphans.h). A `cairn resume` asks each agent of a trial's last placement (and
// every other agent it reached, for an earlier attempt's orphans to drop), on a connection of
// its own (like checkpoint requests, peer/agent_checkpoints.h); the questions about every
// trial go to an agent on one connection, and the agents are asked at once
// (ask_remote_orphans):
//
// Every request names the coordinator's session owner ("HOST:STORE#ID"): <owner> is
// orphan_owner_dir of it (orphan_messages.h), so another store's experiment of the same id
// is never listed, fetched, dropped or waited on.
//
// - orphan_list {owner, trial}: answers {"type": "orphan_list", "trial", "running": bool,
//   "orphans": [{"attempt", "step"}, …]}: whether ranks of the owner's trial still run there (a
//   kept or orphaned session's, or a live connection's: what holds the trial's directory,
//   agent_gc.h AgentInUse), and the attempts and steps of its orphan directories that hold at least
//   one rank's marker (cairn_orphan*.json; whether every rank of a gang finished the same step is
//   the coordinator's call, orphan_checkpoint.h, once it has the directories of every agent).
// - orphan_fetch {owner, trial, attempt, step}: answers {"type": "orphan_manifest", "trial",
//   "attempt", "step",
//   "manifest"} (checkpoint_manifest.h: the directory's files, symlinks refused), reads
//   checkpoint_want {digests, offsets?} (only what the coordinator's store lacks, each from the
//   offset the coordinator asks: what an earlier try cut in the middle left it), sends those
//   contents as chunks (checkpoint_send.h, as for a staged checkpoint's fetch) and answers
//   {"type": "checkpoint_sent", "bytes"}.
// - orphan_drop {owner, trial}: removes DIR/orphans/<owner>/<trial> (every attempt's) once the
//   coordinator holds what it fetched durably, or once it decided an attempt's orphans are
//   stale (not the trial's latest attempt: never adopted); refused while ranks of the trial
//   run there.
//
// Every request is one log line on the agent; a malformed one is refused with one line
// ({"type": "error", "reason"}). Every answer is untrusted on the coordinator's side: the
// listing is checked (parse_orphan_listing), manifests as every manifest is (no "..", no
// absolute path, no duplicate; symlinks are never sent), every content against its SHA-256,
// and nothing is written outside the directory the caller names. A hostile or broken answer
// fails the call with one line naming the agent.
//
// Thread-safety: the agent's handler runs on every connection's thread (stateless; the file
// system and AgentInUse are the shared state); the client functions may run on any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "engine/coordinator/orphan_messages.h"
#include "peer/agent_server.h"
#include "peer/checkpoint_client.h"
#include "store/object_store.h"

namespace cairn {

// ---- the agent's side ----

// The agent's handler of the three requests above (agent `dir`), before `next`.
AgentRequestHandler with_orphan_requests(std::filesystem::path dir, AgentRequestHandler next);

// ---- the coordinator's side ----

// `owner` is the coordinator's session owner (remote_session.h session_owner): only its
// orphans are listed, fetched or dropped, and only its ranks of `trial` count as running.
Result<OrphanListing> list_remote_orphans(const AgentEndpoint& agent, const std::string& owner,
                                          const std::string& trial,
                                          std::chrono::milliseconds timeout);

// The questions to one agent: an orphan_list for each of `trials`, answered into `answers`
// (one per trial, in order).
struct OrphanQuestions {
  const AgentEndpoint* agent = nullptr;
  std::vector<std::string> trials;
  std::vector<Result<OrphanListing>> answers;
};

// Asks every agent of `questions` at once, a thread each, each on one connection of its own:
// connected within `timeout`, and each answer within `timeout` of its question (so a hung agent
// costs `timeout` once, not once per trial, and never holds the other agents' answers back).
// An agent that cannot be connected to, or whose connection breaks, fails the questions it had
// not answered with one line naming it. Returns when every agent is done.
void ask_remote_orphans(std::vector<OrphanQuestions>& questions, const std::string& owner,
                        std::chrono::milliseconds timeout);

struct FetchedOrphan {
  size_t files = 0;            // files written below `into`
  size_t kept = 0;             // files `into` had already (another agent's rank wrote them)
  uint64_t content_bytes = 0;  // content bytes that crossed the wire
};

// fetch_remote_orphan tried again, as checkpoint_retry.h tries a checkpoint transfer, while
// its link fails, within the agent's link window (AgentEndpoint::link_window). A try again
// goes on from where the last one stopped, as a staged checkpoint's fetch does (docs/peers.md
// "Checkpoint transfers over a dropped link"): the contents received whole stay in `into` and
// are not asked for again, and the start of one cut in the middle stays below `staging` and
// only its rest is asked for (checkpoint_want's "offsets"; receive_contents,
// checkpoint_client.h). A refusal is not tried again.
Result<FetchedOrphan> fetch_remote_orphan_retrying(
    const AgentEndpoint& agent, const std::string& owner, const std::string& trial,
    const OrphanStep& orphan, const std::filesystem::path& into, const ObjectStore& objects,
    const std::filesystem::path& staging);

// Fetches the agent's orphan directory of `trial` at `orphan` (its attempt and step) into the local
// directory `into` (made when missing): contents `objects` holds are copied from it, only the
// others travel. A file `into` holds already is kept (a gang's directories are merged, rank 0's
// agent first). Every file written is fsynced, and so are the directories made; `into` may be left
// partly written on error. Contents are received into a directory of the call's own below
// `staging` (made when missing; the store's staging area), verified against their SHA-256 there,
// then moved into `into`; that directory is removed when the call returns.
Result<FetchedOrphan> fetch_remote_orphan(const AgentEndpoint& agent, const std::string& owner,
                                          const std::string& trial, const OrphanStep& orphan,
                                          const std::filesystem::path& into,
                                          const ObjectStore& objects,
                                          const std::filesystem::path& staging);

// Asks the agent to remove its orphan directories of `trial`.
Status drop_remote_orphans(const AgentEndpoint& agent, const std::string& owner,
                           const std::string& trial);

}  // namespace cairn
