#include "peer/agent_sessions.h"

#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "peer/agent_log.h"
#include "peer/random_id.h"

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

std::string short_id(const std::string& id) {
  return id.substr(0, 8);
}

// Whether a kept session that a new session of its owner lets go leaves orphans: only when
// another coordinator process opens it (a resume adopts them); the same one reconnecting
// has given up their attempts, whose orphans would only be stale.
bool leaves_orphans(const AgentSession& kept, const std::string& instance) {
  return !instance.empty() && kept.instance != instance;
}

}  // namespace

void AgentSessions::end_locked(AgentSession& session) {
  if (session.host) session.host->kill_all();
  ranks_running_ -= session.running;
  session.running = 0;
  if (session.control) session.control->close_all();
  session.attached = false;
}

Result<std::string> AgentSessions::open(const std::shared_ptr<AgentSession>& session,
                                        std::string owner, std::chrono::seconds window) {
  auto id = random_hex_id(16, "a session id");
  if (!id.ok()) return id.status();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return Status::Io("pipe: " + errno_text());
  session->wake_read.reset(fds[0]);
  session->wake_write.reset(fds[1]);
  std::vector<std::shared_ptr<AgentSession>> ended;
  {
    std::lock_guard lock(mutex_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      AgentSession& other = *it->second;
      if (!owner.empty() && other.owner == owner && other.attached) {
        other.end_on_release = true;
        other.orphan_on_release = leaves_orphans(other, session->instance);
        other.release = true;
        const char byte = 1;
        (void)!::write(other.wake_write.get(), &byte, 1);
        ++it;
      } else if (!other.attached && !owner.empty() && other.owner == owner) {
        ended.push_back(it->second);
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
    session->id = *id;
    session->owner = std::move(owner);
    session->window = std::min(window, kMaxReattachWindow);
    session->attached = true;
    sessions_[*id] = session;
  }
  // Killing waits for the ranks to be reaped: outside the lock.
  for (auto& s : ended) {
    if (leaves_orphans(*s, session->instance)) {
      orphans_.adopt(s, "a new coordinator of its experiment did not resume it");
      continue;
    }
    agent_log("ended session " + short_id(s->id) + " (" + std::to_string(s->running) +
              " ranks): its coordinator opened a new one");
    end_locked(*s);
  }
  return *id;
}

Result<std::shared_ptr<AgentSession>> AgentSessions::claim(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || id.empty())
    return Status::NotFound("no session " + short_id(id) +
                            " on this agent (ended, or past its reattach window)");
  AgentSession& session = *it->second;
  if (session.attached) {
    session.release = true;
    const char byte = 1;
    (void)!::write(session.wake_write.get(), &byte, 1);
    return Status::Failed("session " + short_id(id) +
                          " is still held by an older connection, which is let go");
  }
  session.attached = true;
  session.release = false;
  session.end_on_release = false;
  return it->second;
}

void AgentSessions::detach(const std::shared_ptr<AgentSession>& session, const std::string& who) {
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(session->id);
    if (it != sessions_.end() && it->second == session && session->window.count() > 0 &&
        !session->end_on_release) {
      session->attached = false;
      session->detached_at = Clock::now();
      if (session->running > 0)
        agent_log("kept " + std::to_string(session->running) + " ranks of " + who +
                  " running (session " + short_id(session->id) + ") for up to " +
                  std::to_string(session->window.count()) + " s: its connection ended");
      return;
    }
    if (it != sessions_.end() && it->second == session) sessions_.erase(it);
  }
  if (session->end_on_release && session->orphan_on_release && session->window.count() > 0) {
    orphans_.adopt(session, "a new coordinator of its experiment did not resume it");
    return;
  }
  end(session);
}

void AgentSessions::end(const std::shared_ptr<AgentSession>& session) {
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(session->id);
    if (it != sessions_.end() && it->second == session) sessions_.erase(it);
  }
  end_locked(*session);
}

void AgentSessions::expire(Clock::time_point now) {
  std::vector<std::shared_ptr<AgentSession>> ended;
  {
    std::lock_guard lock(mutex_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      AgentSession& s = *it->second;
      if (!s.attached && now - s.detached_at >= s.window) {
        ended.push_back(it->second);
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& s : ended)
    orphans_.adopt(s, "no coordinator resumed it within its reattach window of " +
                          std::to_string(s->window.count()) + " s");
  orphans_.poll(now);
}

void AgentSessions::end_all() {
  std::vector<std::shared_ptr<AgentSession>> ended;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, s] : sessions_)
      if (!s->attached) ended.push_back(s);
    for (auto& s : ended) sessions_.erase(s->id);
  }
  for (auto& s : ended) end_locked(*s);
  orphans_.kill_all();
}

size_t AgentSessions::detached() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& [id, s] : sessions_) n += s->attached ? 0 : 1;
  return n;
}

bool is_session_request(const std::string& type) {
  return type == "session_open" || type == "session_resume";
}

bool serve_session_request(AgentSessions& sessions, PeerConnection& peer,
                           std::shared_ptr<AgentSession>& session, const Json& request,
                           const std::string& who) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  auto refuse = [&](const std::string& why) {
    agent_log("refused a " + request["type"].get<std::string>() + " from " + who + ": " + why);
    Json reply{{"type", "error"}, {"code", "no_session"}, {"reason", why}};
    return peer.send(reply, deadline).ok();
  };
  const std::string type = request["type"].get<std::string>();
  if (!session->id.empty()) return refuse("this connection has a session already");
  if (type == "session_open") {
    const Json window = request.value("window", Json());
    // The coordinator's heartbeat timeout: a link that drops is resumed within it, whatever
    // the window (absent: 0).
    const Json link = request.value("link_window", Json(0));
    const Json owner = request.value("owner", Json());
    if (!window.is_number_integer() || window.get<int64_t>() < 0)
      return refuse("\"window\" must be a whole number of seconds >= 0");
    if (!link.is_number_integer() || link.get<int64_t>() < 0)
      return refuse("\"link_window\" must be a whole number of seconds >= 0");
    if (!owner.is_string() || owner.get_ref<const std::string&>().size() > 4096)
      return refuse("\"owner\" must be a string of at most 4096 bytes");
    const auto seconds = std::chrono::seconds(std::min<int64_t>(
        std::max(window.get<int64_t>(), link.get<int64_t>()), kMaxReattachWindow.count()));
    session->link_window = std::chrono::seconds(link.get<int64_t>());
    const Json coordinator = request.value("coordinator", Json(""));
    if (!coordinator.is_string() || coordinator.get_ref<const std::string&>().size() > 200)
      return refuse("\"coordinator\" must be a string of at most 200 bytes");
    session->instance = coordinator.get<std::string>();
    auto id = sessions.open(session, owner.get<std::string>(), seconds);
    if (!id.ok()) return refuse(id.status().message());
    // Counted from here on both sides: the coordinator starts when it reads the answer,
    // before it sends anything else.
    peer.set_journal(&session->journal);
    return peer.send(Json{{"type", "session"}, {"id", *id}, {"window", seconds.count()}}, deadline)
        .ok();
  }
  // session_resume
  if (session->host || session->running > 0) return refuse("this connection runs ranks already");
  const Json id = request.value("id", Json());
  const Json received = request.value("received", Json());
  if (!id.is_string() || !received.is_number_integer())
    return refuse("a session_resume needs \"id\" (a string) and \"received\" (a count)");
  auto claimed = sessions.claim(id.get<std::string>());
  if (!claimed.ok() && claimed.status().kind() == ErrorKind::kFailed) {
    // Held by a connection that is going: the coordinator tries again.
    Json reply{{"type", "error"}, {"code", "session_busy"}, {"reason", claimed.status().message()}};
    return peer.send(reply, deadline).ok();
  }
  if (!claimed.ok()) return refuse(claimed.status().message());
  auto replay = (*claimed)->journal.replay_after(received.get<int64_t>());
  if (!replay.ok()) {
    // It cannot go on without the frames it lost: its coordinator counts its ranks lost.
    sessions.end(*claimed);
    return refuse("session " + short_id(id.get<std::string>()) +
                  " ended: " + replay.status().message());
  }
  session = *claimed;
  peer.set_release(session->wake_read.get(), &session->release);  // the replay can let go too
  agent_log("resumed session " + short_id(session->id) + " of " + who + " (" +
            std::to_string(session->running) + " ranks running, " + std::to_string(replay->size()) +
            " frames sent again)");
  Json reply{{"type", "session_resumed"}, {"received", session->journal.received_count()}};
  if (!peer.send(reply, deadline).ok()) return false;
  peer.set_journal(&session->journal);
  for (const std::string& frame : *replay)
    if (!peer.send_bytes(frame, deadline).ok()) return false;
  return true;
}

}  // namespace cairn
