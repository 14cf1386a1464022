// The coordinator's side of an agent session (peer/agent_sessions.h, docs/peers.md
// "Reattach"): a RemoteLauncher opens one on its connection, so that the agent keeps its
// ranks when the connection drops, and resumes it on a new connection when the link comes
// back before the heartbeat timeout: same ranks, same control streams, every frame once.
//
// Thread-safety: set_remote_session_options before any agent is connected (the
// coordinator's constructor); the rest from the connection's thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "peer/checkpoint_client.h"
#include "peer/peer_connection.h"
#include "peer/session_journal.h"

namespace cairn {

struct RemoteSessionOptions {
  // How long an agent keeps this coordinator's ranks running once its connection ended
  // without a goodbye (the config's reattach_window); 0: it kills them at once.
  std::chrono::seconds window{600};
  // The experiment, as agents tell its sessions apart: a new session of the same owner lets
  // go the ones its coordinator did not resume (ended when this process opened them, left to
  // checkpoint as orphans when another did: session_open's "coordinator").
  std::string owner;
  // A `cairn resume`: a new connection asks to adopt the ranks the agent kept for `owner`
  // (remote_adoption.h) instead of ending them.
  bool adopt = false;
};
void set_remote_session_options(RemoteSessionOptions options);
RemoteSessionOptions remote_session_options();
// "HOST:STORE#ID": this machine's name, the store's directory and the experiment's id.
std::string session_owner(const std::string& store_root, int64_t experiment_id);

// Opens a session on `peer`, a connection that has said hello and carries nothing else yet.
// The agent keeps it for the options' window, and at least `link_window` (the heartbeat
// timeout, within which a dropped link is resumed). On success the journal counts `peer`'s
// frames from now on and the session's id is returned; "" when the agent has no sessions
// (an older agent: a dropped link then loses the connection's ranks, as before).
Result<std::string> open_remote_session(PeerConnection& peer, SessionJournal& journal,
                                        std::chrono::milliseconds link_window, Deadline deadline);

// Connects to `agent` again and resumes session `id`: the new connection, with the journal
// counting its frames, after the frames the agent did not receive were sent again (the
// agent sends its own after its answer). `gone` is set when trying again cannot help: the
// agent answered that the session is no more (ended, or past what it kept: a restarted
// agent has none).
Result<std::unique_ptr<PeerConnection>> resume_remote_session(const AgentEndpoint& agent,
                                                              const std::string& id,
                                                              SessionJournal& journal,
                                                              Deadline deadline, bool* gone);

}  // namespace cairn
