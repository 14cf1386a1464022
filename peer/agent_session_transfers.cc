// AgentSessions' side of checkpoint transfers (agent_sessions.h watch_transfer,
// release_transfers; docs/peers.md "Checkpoint transfers over a dropped link"): a transfer
// runs on a connection of its own, which the coordinator's session does not carry, so a link
// gone silent would hold the agent's transfer thread (and, for a fetch, its read of the staged
// directory) until the wire's 60 s frame timeout. Its coordinator's session notices sooner:
// its connection ends when the coordinator resumes it on a new one (after half the heartbeat
// timeout of silence), when nothing is heard on it for twice the heartbeat timeout, or when
// the link visibly drops; the transfers opened while that connection held the session are
// let go then.
#include <utility>

#include "peer/agent_sessions.h"

namespace cairn {

std::unique_ptr<LinkWatch::Registration> AgentSessions::watch_transfer(const std::string& id,
                                                                       PeerConnection& peer) {
  if (id.empty()) return nullptr;
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  return LinkWatch::watch(it->second->transfers, peer);
}

void AgentSessions::release_transfers(AgentSession& session) {
  std::shared_ptr<LinkWatch> ended;
  {
    std::lock_guard lock(mutex_);
    ended = std::exchange(session.transfers, std::make_shared<LinkWatch>(kTransferReleased));
  }
  ended->release_all();
}

}  // namespace cairn
