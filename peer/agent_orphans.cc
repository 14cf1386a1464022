#include "peer/agent_orphans.h"

#include <algorithm>

#include "peer/agent_log.h"
#include "peer/agent_sessions.h"

namespace cairn {

namespace {

std::string ranks_text(int n) {
  return std::to_string(n) + (n == 1 ? " rank" : " ranks");
}

}  // namespace

void AgentOrphans::adopt(const std::shared_ptr<AgentSession>& session, const std::string& why) {
  const std::string id = session->id.substr(0, 8);
  // Their SDKs see the channel end: they checkpoint into their orphan directories (made
  // now: not at launch) and exit.
  if (session->host && session->running > 0) session->host->make_orphan_dirs();
  if (session->control) session->control->close_all();
  session->attached = false;
  if (!session->host || session->running <= 0) {
    agent_log("ended session " + id + " (no ranks running): " + why);
    session->host.reset();
    return;
  }
  agent_log("asked " + ranks_text(session->running) + " of session " + id +
            " to checkpoint as orphans and exit (their control channels closed; killed if "
            "still running in " +
            std::to_string(bound_.count()) + " s): " + why);
  std::lock_guard lock(mutex_);
  entries_.push_back({session, Clock::now() + bound_, 0});
}

bool AgentOrphans::reap(Entry& entry) {
  AgentSession& s = *entry.session;
  if (!s.host) return true;
  for (RankHost::Event& event : s.host->poll()) {
    if (!event.ended) {
      entry.output_dropped += event.output.size();
      continue;
    }
    --s.running;
    --ranks_running_;
  }
  return s.running <= 0;
}

void AgentOrphans::release(Entry& entry, const std::string& how) {
  AgentSession& s = *entry.session;
  agent_log("session " + s.id.substr(0, 8) + ": " + how +
            (entry.output_dropped
                 ? " (" + std::to_string(entry.output_dropped) + " bytes of their output dropped)"
                 : std::string()));
  // The host's holds on the trials' directories go with it (agent_gc.h): a `cairn resume`
  // asking whether the trial still runs here hears it does not.
  s.host.reset();
}

void AgentOrphans::poll(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (reap(*it)) {
      release(*it, "its orphaned ranks exited");
      it = entries_.erase(it);
      continue;
    }
    if (now >= it->kill_at) {
      AgentSession& s = *it->session;
      const int left = s.running;
      s.host->kill_all();
      ranks_running_ -= left;
      s.running = 0;
      release(*it, "killed " + ranks_text(left) + " still running " +
                       std::to_string(bound_.count()) +
                       " s after their control channels closed (no orphan checkpoint from them)");
      it = entries_.erase(it);
      continue;
    }
    ++it;
  }
}

void AgentOrphans::kill_all() {
  std::lock_guard lock(mutex_);
  for (Entry& entry : entries_) {
    AgentSession& s = *entry.session;
    if (!s.host) continue;
    (void)reap(entry);
    s.host->kill_all();
    ranks_running_ -= std::max(0, s.running);
    s.running = 0;
    s.host.reset();
  }
  entries_.clear();
}

int AgentOrphans::running() const {
  std::lock_guard lock(mutex_);
  int n = 0;
  for (const Entry& entry : entries_) n += std::max(0, entry.session->running);
  return n;
}

}  // namespace cairn
