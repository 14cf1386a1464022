#include "engine/coordinator/remote_session.h"

#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>

#include "peer/agent_client.h"

namespace cairn {

namespace {

std::mutex g_mutex;
RemoteSessionOptions g_options;

// This process among the coordinators of one owner: an agent ends the kept sessions of the
// same coordinator that reconnects (their attempts were given up), and lets those of an
// earlier one (killed, then `cairn resume`) checkpoint as orphans (peer/agent_orphans.h).
const std::string& coordinator_instance() {
  static const std::string instance =
      std::to_string(::getpid()) + "-" +
      std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  return instance;
}

}  // namespace

void set_remote_session_options(RemoteSessionOptions options) {
  std::lock_guard lock(g_mutex);
  g_options = std::move(options);
}

RemoteSessionOptions remote_session_options() {
  std::lock_guard lock(g_mutex);
  return g_options;
}

std::string session_owner(const std::string& store_root, int64_t experiment_id) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host) + ":" + store_root + "#" + std::to_string(experiment_id);
}

Result<std::string> open_remote_session(PeerConnection& peer, SessionJournal& journal,
                                        std::chrono::milliseconds link_window, Deadline deadline) {
  const RemoteSessionOptions options = remote_session_options();
  Json open{{"type", "session_open"},
            {"window", static_cast<int64_t>(options.window.count())},
            {"link_window", static_cast<int64_t>((link_window.count() + 999) / 1000)},
            {"owner", options.owner},
            {"coordinator", coordinator_instance()}};
  if (Status sent = peer.send(open, deadline); !sent.ok()) return sent;
  auto answer = peer.receive(deadline);
  if (!answer.ok()) return answer.status();
  if (!answer->has_value()) return Status::Failed("the agent closed the connection");
  const Json& m = **answer;
  if (m.value("type", "") == "session" && m.value("id", Json()).is_string()) {
    peer.set_journal(&journal);
    return m["id"].get<std::string>();
  }
  if (m.value("type", "") == "error" && m.value("code", Json()) != "no_session")
    return std::string();  // an agent that does not know sessions
  return Status::Failed("the agent refused a session: " +
                        m.value("reason", std::string("no reason")).substr(0, 300));
}

Result<std::unique_ptr<PeerConnection>> resume_remote_session(const AgentEndpoint& agent,
                                                              const std::string& id,
                                                              SessionJournal& journal,
                                                              Deadline deadline, bool* gone) {
  *gone = false;
  PeerFailure failure;
  auto peer = connect_to_agent(agent.address, agent.tls, deadline, &failure);
  // Refused or unreachable: perhaps the agent is gone, perhaps only the link (a proxy that
  // restarts refuses too); the caller tries again until its heartbeat timeout.
  if (!peer.ok()) return peer.status();
  Json resume{{"type", "session_resume"}, {"id", id}, {"received", journal.received_count()}};
  if (Status sent = (*peer)->send(resume, deadline); !sent.ok()) return sent;
  auto answer = (*peer)->receive(deadline);
  if (!answer.ok()) return answer.status();
  if (!answer->has_value()) return Status::Failed("the agent closed the connection");
  const Json& m = **answer;
  if (m.value("type", "") != "session_resumed" ||
      !m.value("received", Json()).is_number_integer()) {
    *gone = m.value("code", Json()) == "no_session";
    return Status::Failed(
        m.value("reason", std::string("the agent did not resume the session")).substr(0, 300));
  }
  auto replay = journal.replay_after(m["received"].get<int64_t>());
  if (!replay.ok()) {
    *gone = true;
    return replay.status();
  }
  (*peer)->set_journal(&journal);
  for (const std::string& frame : *replay)
    if (Status sent = (*peer)->send_bytes(frame, deadline); !sent.ok()) return sent;
  return std::move(*peer);
}

}  // namespace cairn
