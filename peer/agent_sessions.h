// A coordinator's ranks on an agent, kept across that coordinator's connections
// (docs/peers.md "Reattach"). A connection's session holds what runs for it: the ranks
// (its RankHost), their relayed control channels (ControlRelay) and the frames that may
// have to be sent again (SessionJournal). A coordinator that opens a session
// ({"type": "session_open", "window": S, "owner": O}) asks the agent to keep it when its
// connection ends without {"type": "goodbye"}: the ranks keep running for S seconds, and a
// new connection (authenticated by the same cluster key) that resumes the session
// ({"type": "session_resume", "id", "received"}) carries on with the same ranks, streams and
// frames. After S seconds the ranks are asked to checkpoint as orphans and exit
// (agent_orphans.h). A goodbye, the agent's stop or a connection
// that never opened a session end the ranks at once, as before.
//
// While a session is detached nothing is read from its ranks: their output waits in their
// output pipes (the RankHost's; a rank that fills its pipe blocks in its write), their
// control messages wait in their sockets, and a rank that writes more than a control window and its
// socket hold blocks until a coordinator is back (so nothing is lost and nothing grows in memory);
// a rank that ends meanwhile is reported, with its exit status, once a connection resumes the
// session.
//
// `owner` names the coordinator's experiment (its machine, store and experiment id): a
// new session of the same owner lets that owner's detached sessions go, which the coordinator
// that opened it did not resume. A lost agent reconnected to the same coordinator process
// ends them (their trials restart from their checkpoints). A `cairn resume` after the
// coordinator was killed first claims the newest one (claim_owner, session_adoption.h) and
// goes on with the ranks it adopts; the ranks nobody adopts, and those of another
// coordinator process's session, checkpoint as orphans and exit, and the resumed
// coordinator adopts those checkpoints (agent_orphans.h, engine/coordinator/remote_orphans.h).
//
// Thread-safety: every member is safe to call from any thread (one mutex). A session is
// used by one connection thread at a time: the one that opened or claimed it.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/file_util.h"
#include "common/status.h"
#include "peer/agent_orphans.h"
#include "peer/control_relay.h"
#include "peer/link_watch.h"
#include "peer/rank_host.h"
#include "peer/session_adoption.h"
#include "peer/session_journal.h"

namespace cairn {

// The longest window an agent keeps a detached session for, whatever the coordinator asks.
inline constexpr std::chrono::seconds kMaxReattachWindow{86400};

// Why an agent's side of a checkpoint transfer was let go (its error says "released: …").
inline constexpr const char* kTransferReleased = "its coordinator's session connection ended";

struct AgentSession {
  std::string id;     // "" while the connection has not opened a session
  std::string owner;  // the coordinator's experiment
  // Which coordinator process of the owner opened it (session_open's "coordinator"; "" when
  // not said): a new session of the owner from another one (a `cairn resume`) lets its ranks
  // checkpoint as orphans, from the same one (an agent it lost and reconnected) ends them.
  std::string instance;
  bool orphan_on_release = false;  // a new session of another coordinator asked it to go
  std::chrono::seconds window{0};
  // The coordinator's heartbeat timeout: a connection of the session that hears nothing
  // for twice this long (the coordinator sends a heartbeat every second) has dropped
  // silently, and lets the session go. 0: not watched.
  std::chrono::seconds link_window{0};
  std::unique_ptr<RankHost> host;
  std::unique_ptr<ControlRelay> control;
  int running = 0;  // ranks started and not yet reported ended
  SessionJournal journal;
  // A new connection of the coordinator claims the session while this one still holds it
  // (its link dropped without this end noticing): the holding connection lets go when
  // `release` is set, woken by a byte on `wake_read` (which it waits on).
  std::atomic<bool> release{false};
  UniqueFd wake_read, wake_write;
  // The checkpoint transfers that name this session (their requests' "session"), each on a
  // connection of its own: let go when the session's connection ends, however it ends, and
  // swapped for a fresh one then (AgentSessions::release_transfers; under its mutex).
  std::shared_ptr<LinkWatch> transfers = std::make_shared<LinkWatch>(kTransferReleased);
  // Its ranks as a `cairn resume` adopts them (session_adoption.h).
  SessionAdoption adoption;

  // Kept by AgentSessions.
  bool attached = true;
  bool end_on_release = false;  // a new session of its owner asked it to go: ended, not kept
  std::chrono::steady_clock::time_point detached_at;
};

class AgentSessions {
 public:
  // `ranks_running` is the agent's count over every connection: ending a session takes
  // its ranks off it.
  explicit AgentSessions(std::atomic<int>& ranks_running) : ranks_running_(ranks_running) {}
  ~AgentSessions() { end_all(); }
  AgentSessions(const AgentSessions&) = delete;
  AgentSessions& operator=(const AgentSessions&) = delete;

  // Registers `session` (attached) under a new random id, which it returns, after ending
  // the detached sessions of the same owner (and asking an attached one of that owner, whose
  // coordinator is gone without this agent noticing, to let go and end). It is kept for
  // `window` after its connection drops (at most kMaxReattachWindow).
  Result<std::string> open(const std::shared_ptr<AgentSession>& session, std::string owner,
                           std::chrono::seconds window);
  // The detached session `id`, attached to the caller from now on. Errors (one line):
  // kNotFound when there is none (never opened, ended, past its window); kFailed when
  // another connection still holds it, which is asked to let go (try again shortly).
  Result<std::shared_ptr<AgentSession>> claim(const std::string& id);
  // The session's connection ended without a goodbye: kept for its window (when it was
  // opened and has one), else ended. `who` names the coordinator in the log line.
  void detach(const std::shared_ptr<AgentSession>& session, const std::string& who);
  // Kills the session's ranks and forgets it.
  void end(const std::shared_ptr<AgentSession>& session);
  // Lets every detached session past its window go (its ranks checkpoint as orphans), and
  // reaps the orphans; called every second or so.
  void expire(std::chrono::steady_clock::time_point now);
  // Ends every detached session and kills every orphan (the agent stops).
  void end_all();

  size_t detached() const;
  // For a `cairn resume` (session_adoption.h; defined there): the newest detached session of
  // `owner`, attached to the caller from now on (null when there is none), after ending the
  // owner's older detached ones. kFailed while a connection of the owner still holds one
  // (asked to let go: try again shortly).
  Result<std::shared_ptr<AgentSession>> claim_owner(const std::string& owner);

  // Checkpoint transfers (agent_session_transfers.cc): `peer`, a connection that serves a
  // checkpoint request naming session `id`, is let go (its waits end, "released: …") when
  // that session's connection ends; null when no such session is open (the transfer goes on
  // as before, bounded by the wire's timeouts).
  std::unique_ptr<LinkWatch::Registration> watch_transfer(const std::string& id,
                                                          PeerConnection& peer);
  // The session's connection ended (dropped, silent, claimed by a new one, ended): lets go
  // of the transfers registered so far; those registered from now on wait for the next end.
  void release_transfers(AgentSession& session);

 private:
  void end_locked(AgentSession& session);

  std::atomic<int>& ranks_running_;
  // Sessions let go without a goodbye: their ranks checkpoint as orphans (agent_orphans.h).
  AgentOrphans orphans_{ranks_running_};
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<AgentSession>> sessions_;  // opened, by id
};

// Whether `type` is a session request serve_session_request answers.
bool is_session_request(const std::string& type);

// Answers a session request of the connection `peer` from coordinator `who`, whose session
// is `session`: "session_open" registers it; "session_resume" swaps it (which must have no
// ranks) for the claimed detached one, answers {"type": "session_resumed", "received"} and
// sends again the frames the coordinator did not receive. A refusal is an "error" answer
// with "code": "no_session". Returns false when the connection broke.
bool serve_session_request(AgentSessions& sessions, PeerConnection& peer,
                           std::shared_ptr<AgentSession>& session, const Json& request,
                           const std::string& who);

}  // namespace cairn
