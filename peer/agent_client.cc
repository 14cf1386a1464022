#include "peer/agent_client.h"

#include <set>

#include "common/build_info.h"
#include "peer/keyless_guard.h"
#include "peer/peer_protocol.h"

namespace cairn {

Result<std::unique_ptr<PeerConnection>> connect_to_agent(const PeerAddress& address,
                                                         std::shared_ptr<TlsContext> client,
                                                         Deadline deadline, PeerFailure* failure,
                                                         std::string* agent_version,
                                                         const PeerRelease* release) {
  const bool keyless = client->key().none();
  auto connection = PeerConnection::connect(address, std::move(client), deadline, failure, release);
  if (!connection.ok()) return connection.status();
  PeerConnection& peer = **connection;
  // Keyless: nothing is sent to another user's agent (keyless_guard.h).
  if (Status same_user = check_keyless_agent(keyless, peer, address); !same_user.ok()) {
    *failure = PeerFailure::kKeyMismatch;
    return same_user;
  }
  auto broken = [&](const std::string& why) {
    *failure = PeerFailure::kBroken;
    return Status::Failed(address.text() + ": " + why);
  };
  Status sent = peer.send(hello_message("coordinator"), deadline);
  if (!sent.ok()) return broken(sent.message());
  auto reply = peer.receive(deadline);
  if (!reply.ok()) return broken(reply.status().message());
  if (!reply->has_value()) return broken("closed the connection after the handshake");
  const Json& message = **reply;
  if (agent_version && message.contains("cairn") && message["cairn"].is_string())
    *agent_version = message["cairn"].get<std::string>().substr(0, 64);
  if (message["type"] == "refused") {
    const std::string reason = message.value("reason", std::string("no reason given"));
    if (message.value("code", std::string()) == "version_mismatch") {
      *failure = PeerFailure::kVersionMismatch;
      auto protocol = message.find("protocol");
      if (protocol != message.end() && protocol->is_number_integer())
        return Status::Failed(address.text() + " speaks peer protocol version " +
                              std::to_string(protocol->get<int64_t>()) + " (cairn " +
                              message.value("cairn", std::string("?")).substr(0, 64) +
                              "), this cairn version " + std::to_string(kPeerProtocolVersion) +
                              " (cairn " CAIRN_VERSION "): run the same cairn on every machine");
      return Status::Failed(address.text() + " refused us: " + reason);
    }
    if (message.value("code", std::string()) == "other_user") {
      *failure = PeerFailure::kKeyMismatch;  // for a keyless agent, its user is its key
      return Status::Failed(address.text() + " refused us: " + reason);
    }
    return broken("refused us: " + reason);
  }
  PeerHello hello;
  Status checked = check_hello(message, &hello);
  if (!checked.ok()) {
    if (checked.kind() == ErrorKind::kFailed) {
      *failure = PeerFailure::kVersionMismatch;
      return Status::Failed(address.text() + ": " + checked.message());
    }
    return broken(checked.message());
  }
  *failure = PeerFailure::kNone;
  return connection;
}

Json AgentStatus::to_json() const {
  const bool ok = failure == PeerFailure::kNone;
  Json doc{{"address", address},
           {"found_by", found_by},
           {"slots", ok ? Json{{"free", slots_free}, {"total", slots_total}} : Json()},
           {"devices", ok ? devices : Json()},
           {"version", version.empty() ? Json() : Json(version)},
           {"status", peer_failure_name(failure)},
           {"agent", agent.empty() ? Json() : Json(agent)}};
  if (!ok) doc["error"] = error;
  return doc;
}

AgentStatus query_agent_status(const PeerAddress& address, std::shared_ptr<TlsContext> client,
                               Deadline deadline) {
  AgentStatus status;
  status.address = address.text();
  auto connection =
      connect_to_agent(address, std::move(client), deadline, &status.failure, &status.version);
  if (!connection.ok()) {
    status.error = connection.status().message();
    return status;
  }
  PeerConnection& peer = **connection;
  auto fail = [&](const std::string& why) {
    status.failure = PeerFailure::kBroken;
    status.error = address.text() + ": " + why;
    return status;
  };
  Status sent = peer.send(Json{{"type", "status"}}, deadline);
  if (!sent.ok()) return fail(sent.message());
  auto reply = peer.receive(deadline);
  if (!reply.ok()) return fail(reply.status().message());
  if (!reply->has_value()) return fail("closed the connection");
  const Json& message = **reply;
  try {
    if (message["type"] != "status")
      return fail("answered status with a " + message["type"].get<std::string>().substr(0, 64));
    status.slots_free = message.at("slots").at("free").get<int>();
    status.slots_total = message.at("slots").at("total").get<int>();
    status.devices = message.at("devices");
    status.version = message.at("version").get<std::string>();
    // An older agent sends none: it is only not told apart from itself at another address.
    if (auto id = message.find("agent"); id != message.end() && id->is_string())
      status.agent = id->get<std::string>().substr(0, 64);
  } catch (const Json::exception& e) {
    return fail(std::string("malformed status reply: ") + e.what());
  }
  peer.close(deadline);
  return status;
}

std::vector<bool> first_of_each_agent(const std::vector<AgentStatus>& statuses) {
  std::vector<bool> first(statuses.size(), true);
  std::set<std::string> seen;
  for (size_t i = 0; i < statuses.size(); ++i)
    if (!statuses[i].agent.empty() && !seen.insert(statuses[i].agent).second) first[i] = false;
  return first;
}

}  // namespace cairn
