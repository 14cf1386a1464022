// The agent's server (`cairn agent`): accepts peer connections, authenticates each with the
// cluster key (peer_connection.h), checks the peer's protocol version (peer_protocol.h) and
// answers its requests: "status", "heartbeat", "probe" (route_probe.h), the launch/signal
// requests of rank_messages.h, which a RankHost made for the connection carries out (output
// and exits are sent back as they happen), the checkpoint requests of agent_checkpoints.h,
// and those of a request handler the CLI installs (code and data shipping,
// engine/coordinator/agent_shipping.h); the ranks' control channels are relayed over the
// same connection (control_relay.h). What runs for a connection is its session
// (agent_sessions.h): "session_open" and "session_resume" keep it when the connection
// drops and carry it over to a new connection of the same coordinator; otherwise (a
// goodbye, a connection without a session, the agent stopping) its ranks are killed when
// the connection ends.
//
// One thread per connection, at most kMaxAgentConnections at once; the serving thread only
// accepts. A peer that fails the handshake, speaks another protocol version or sends a bad
// frame is refused with one log line naming its address, and only its connection ends.
//
// Thread-safety: serve() is called once, from one thread; it owns every connection thread
// and joins them all before it returns.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "peer/peer_connection.h"
#include "peer/rank_host.h"
#include "peer/tls_session.h"

namespace cairn {

inline constexpr int kMaxAgentConnections = 64;

// What the agent says about its machine in a status reply.
struct AgentInfo {
  int slots_total = 1;
  Json devices = Json::array();  // ["cpu"] or ["gpu0", "gpu1", …] (slot_pool.h's names)
  // The agent's --dir: ranks' control sockets go in DIR/control (control_relay.h), and
  // checkpoints (agent_checkpoints.h) live below it; empty: control sockets in a fresh
  // directory under /tmp.
  std::filesystem::path dir;
  // Whether it stages and serves checkpoints below DIR (agent_checkpoints.h): not a keyless
  // agent, to which any local user could connect.
  bool keep_checkpoints = true;
  // This agent process's id (random; made by the server when empty). An agent reached at
  // several addresses (interfaces, names) answers the same id at each, so a coordinator
  // counts its slots once (agent_client.h first_of_each_agent).
  std::string id;
};

// The reply to {"type": "status"}:
//   {"type": "status", "slots": {"free", "total"}, "devices", "version", "protocol", "agent"}
Json agent_status_message(const AgentInfo& info, int slots_free);

// Answers requests the server itself does not know (code and data shipping,
// engine/coordinator/agent_shipping.h): the reply, or nullopt for a type it does not handle
// either. Called from every connection's thread at once; it may read more frames from
// `peer` (a request's chunks).
using AgentRequestHandler = std::function<std::optional<Json>(
    const Json& request, PeerConnection& peer, const std::string& peer_name)>;

class AgentServer {
 public:
  // `hosts` makes each connection's RankHost; when empty, launches are refused with
  // `no_hosts_reason`.
  AgentServer(UniqueFd listener, std::shared_ptr<TlsContext> tls, AgentInfo info,
              RankHostFactory hosts = {}, std::string no_hosts_reason = {});
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  // Before serve(): where requests of other types go.
  void set_request_handler(AgentRequestHandler handler);

  // Serves until SIGTERM, SIGINT or SIGHUP arrives on `signal_fd`, a non-blocking
  // descriptor whose bytes are signal numbers (a SignalPipe's); then closes the listener,
  // ends every connection and every kept session (killing their ranks) and returns once
  // their threads are joined. Kept sessions past their window end as it serves.
  // Returns the signal that ended it.
  Result<int> serve(int signal_fd);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn
