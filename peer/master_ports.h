// MASTER_PORT on an agent that hosts rank 0 of a gang over machines (docs/peers.md "Before a
// gang over machines starts"): the coordinator cannot know which ports are free on another
// machine, so it asks rank 0's agent.
//
//   {"type": "master_port"}                      → {"type": "master_port", "port": P}
//   {"type": "master_port_release", "port": P}   → {"type": "master_port_released", "port": P}
//
// The agent binds a listening TCP socket on every address with a port the kernel picks (so P
// is free there), and keeps it listening — connections complete in its backlog — while the
// other machines of the gang probe MASTER_ADDR:P from their side; the coordinator then
// releases it, on the same connection and before it sends rank 0's launch, so rank 0 can
// bind P. A port never released (the coordinator died in between) is closed at the agent's
// next master_port request after kMasterPortHold, or when the agent stops.
//
// Thread-safety: one MasterPorts serves every connection thread of an agent (a mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/file_util.h"
#include "peer/agent_server.h"

namespace cairn {

inline constexpr auto kMasterPortHold = std::chrono::seconds(60);

class MasterPorts {
 public:
  // A port listening on every address of this machine until release() (or expiry).
  Result<uint16_t> hold();
  // Closes the listener of `port`; false when none was held.
  bool release(uint16_t port);
  size_t held() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Held {
    UniqueFd listener;
    Clock::time_point until;
  };
  mutable std::mutex mutex_;
  std::map<uint16_t, Held> held_;
};

// The answer to one of the two requests above (logged, one line), or nullopt for another type.
std::optional<Json> answer_master_port(MasterPorts& ports, const Json& request,
                                       const std::string& name);

// The agent's handler of the two requests above, before `next` (the other requests an
// agent answers, agent_server.h).
AgentRequestHandler with_master_ports(AgentRequestHandler next);

}  // namespace cairn
