#include "peer/keyless_guard.h"

#include <chrono>

#include "peer/agent_log.h"
#include "peer/peer_protocol.h"
#include "peer/socket_owner.h"

namespace cairn {

std::string keyless_coordinator_refusal(const TlsContext& tls, int fd) {
  if (!tls.key().none()) return "";
  return other_user_refusal(fd, "coordinator", "this agent's");
}

void refuse_other_user(PeerConnection& peer, const std::string& name, const std::string& why) {
  using Clock = std::chrono::steady_clock;
  agent_log("refused " + name + ": " + why);
  (void)peer.receive(Clock::now() + std::chrono::seconds(2));  // its hello, unread otherwise
  Json refusal = refusal_message(why);
  refusal["code"] = "other_user";
  (void)peer.send(refusal, Clock::now() + std::chrono::seconds(2));
  peer.close(Clock::now() + std::chrono::seconds(1));
}

Status check_keyless_agent(bool keyless, const PeerConnection& peer, const PeerAddress& address) {
  if (!keyless) return Status::Ok();
  const std::string why = other_user_refusal(peer.fd(), "agent", "this user's");
  if (why.empty()) return Status::Ok();
  return Status::Failed(address.text() + ": " + why);
}

}  // namespace cairn
