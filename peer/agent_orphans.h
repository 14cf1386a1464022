// Kept ranks that no coordinator adopts become orphans (docs/peers.md "Reattach", issue 17
// item 8): when a detached session's reattach window ends, or a new session of the same
// owner from another coordinator process (a `cairn resume`) makes the agent let the kept
// sessions go, their ranks are not killed. Their orphan directories are made
// (RankHost::make_orphan_dirs) and their relayed control channels closed instead
// (ControlRelay::close_all: the connection's listener and the streams), so
// each rank's SDK sees its channel end as it would if a local coordinator died: it
// checkpoints at its next step into $CAIRN_ORPHAN_DIR/<step>/ (DIR/orphans/<trial id> on
// an agent, engine/coordinator/remote_paths.h) and exits. A `cairn resume` then fetches that
// directory and adopts it (engine/coordinator/remote_orphans.h).
//
// What a rank wrote to its control channel that nobody read while its session was detached
// is not copied here: every training report a rank sent is kept by its SDK until cairn
// acknowledges storing it, and an orphan checkpoint carries the unacknowledged ones
// (cairn_orphan_metrics.jsonl, docs/protocol.md), so those lines are in the orphan already.
// Output written after the session detached is read and dropped (a rank must not block on
// a full pipe while it checkpoints).
//
// A rank's slot stays held until it exits; one still running `bound` after its channel
// closed (it may be mid-epoch, or not use the SDK) is killed then. One log line per event:
// the ranks asked to checkpoint, the session's ranks all exited, the ranks killed at the
// bound.
//
// Thread-safety: every member is safe to call from any thread (one mutex). A session handed
// to adopt() is used by no connection any more.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cairn {

struct AgentSession;

// How long an orphaned rank has to checkpoint and exit after its control channel closed.
inline constexpr std::chrono::seconds kOrphanExitBound{300};

class AgentOrphans {
 public:
  using Clock = std::chrono::steady_clock;

  // `ranks_running` is the agent's count over every connection (agent_sessions.h).
  explicit AgentOrphans(std::atomic<int>& ranks_running,
                        std::chrono::seconds bound = kOrphanExitBound)
      : ranks_running_(ranks_running), bound_(bound) {}
  ~AgentOrphans() { kill_all(); }
  AgentOrphans(const AgentOrphans&) = delete;
  AgentOrphans& operator=(const AgentOrphans&) = delete;

  // Closes the session's control channels (its ranks checkpoint as orphans and exit) and
  // keeps it until they have; `why` ends the log line. A session without running ranks is
  // let go at once.
  void adopt(const std::shared_ptr<AgentSession>& session, const std::string& why);
  // Reaps the ranks that exited (their slots are free again), kills those past the bound.
  // Called every second or so.
  void poll(Clock::time_point now);
  // Kills every rank still running (the agent stops).
  void kill_all();
  // Ranks still running after their channel closed.
  int running() const;

 private:
  struct Entry {
    std::shared_ptr<AgentSession> session;
    Clock::time_point kill_at;
    uint64_t output_dropped = 0;
  };
  // Reaps what ended; true when the session has no rank left.
  bool reap(Entry& entry);
  void release(Entry& entry, const std::string& how);

  std::atomic<int>& ranks_running_;
  const std::chrono::seconds bound_;
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace cairn
