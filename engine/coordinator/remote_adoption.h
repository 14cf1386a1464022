// The coordinator's side of adopting, on `cairn resume`, the ranks an agent kept running
// after the previous coordinator was killed (docs/peers.md "Adoption";
// peer/session_adoption.h is the agent's side). A resuming coordinator's connection asks
// the agent for the experiment's kept session (session_adopt) instead of opening a new one:
// the agent answers with the ranks it kept, paused. The coordinator takes the trials whose
// whole gang still runs there at the attempt the store records (coordinator_adoption.cc),
// registers their ranks with the connection's launcher without starting anything
// (RemoteLauncher::adopt), and then says which it took (adopt_ranks) and where each one's
// output file ends: the agent kills the others, sends again each adopted rank's output from
// that byte on (what it relayed to the dead coordinator that never reached the file;
// every launch said where the rank's output begins in the file, "output_at"), and replays
// each adopted rank's hello and unanswered requests on a re-opened control stream, which the
// coordinator serves as usual.
//
// Thread-safety: set_remote_session_options' rules (remote_session.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "engine/coordinator/gang_operations.h"
#include "peer/peer_connection.h"
#include "peer/session_journal.h"

namespace cairn {

// A rank the agent kept: `id` is its name on the connection (the dead coordinator's), the
// rest what its launch said (CAIRN_TRIAL_ID, CAIRN_ATTEMPT, RANK) and its process there.
struct KeptRank {
  int64_t id = 0;
  std::string trial;
  int64_t attempt = 0;
  int64_t rank = 0;
  int64_t pid = 0;
  bool running = false;
  // The operations it was given (gang_operations.h); nullopt: its agent did not say.
  std::optional<KeptOperations> operations;
};

// The ranks of a session_adopted answer; malformed entries (their "operations" included) are
// left out, so their trials are not adopted.
std::vector<KeptRank> parse_kept_ranks(const Json& answer);

// As open_remote_session (remote_session.h), but when the options say `adopt`, the agent is
// asked for the owner's kept session first: *adopted is then true and *kept holds its ranks
// (the session waits, paused, for the adopt_ranks that end_adoption sends). An agent with
// nothing kept opens a new session; one that does not know session_adopt is asked again
// with session_open.
Result<std::string> open_adopting_session(PeerConnection& peer, SessionJournal& journal,
                                          std::chrono::milliseconds link_window, Deadline deadline,
                                          std::vector<KeptRank>* kept, bool* adopted);

// {"type": "adopt_ranks", "ranks": [ids], "output_at": [sizes]}: `output_at[i]` is the size
// of the output file of the rank `ids[i]` as the new coordinator found it (where the agent's
// replay of the output the dead coordinator never wrote there lands; -1: unknown, nothing
// replayed).
Json adopt_ranks_message(const std::vector<int64_t>& ids, const std::vector<int64_t>& output_at);

}  // namespace cairn
