// The coordinator's side of talking to an agent: connect, authenticate, exchange hellos
// (peer_protocol.h), then requests. `cairn peers` uses query_agent_status; the remote
// launcher will use connect_to_agent and keep the connection.
//
// Thread-safety: pure functions over their arguments; a TlsContext may be shared.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"

namespace cairn {

// A connection to an agent that has said hello in our protocol version. On failure
// `failure` says which kind (a refusal with code "version_mismatch", or a hello of another
// version, is kVersionMismatch) and the error is one line naming the address;
// `agent_version` gets the agent's cairn version whenever it said it. `release`: as
// PeerConnection::connect's, for the handshake and the hellos.
Result<std::unique_ptr<PeerConnection>> connect_to_agent(const PeerAddress& address,
                                                         std::shared_ptr<TlsContext> client,
                                                         Deadline deadline, PeerFailure* failure,
                                                         std::string* agent_version = nullptr,
                                                         const PeerRelease* release = nullptr);

// What `cairn peers` shows of one agent.
struct AgentStatus {
  std::string address;            // as listed
  std::string found_by = "list";  // list, multicast or broadcast (SPEC)
  PeerFailure failure = PeerFailure::kNone;
  std::string error;  // one line, when failure != kNone
  int slots_free = 0;
  int slots_total = 0;
  Json devices = Json::array();
  std::string version;  // the agent's cairn version (also known on a version mismatch)
  std::string agent;    // the agent process's id (agent_server.h AgentInfo), when ok
  // {"address", "found_by", "slots": {"free", "total"}, "devices", "version", "status"},
  // "agent" (its id, or null), and "error" when status is not "ok"; slots and devices are
  // null when unknown.
  Json to_json() const;
};

// Connects, asks for the agent's status and closes, all before `deadline`. Never fails:
// what went wrong is in the result.
AgentStatus query_agent_status(const PeerAddress& address, std::shared_ptr<TlsContext> client,
                               Deadline deadline);

// For each status, whether it is the first to name its agent: false for an agent that an
// earlier status already names by its id (the same agent reached at another address: an
// interface it also listens on, another name of its machine, a beacon sent on another
// interface). Statuses without an id (not ok) are all first.
std::vector<bool> first_of_each_agent(const std::vector<AgentStatus>& statuses);

}  // namespace cairn
