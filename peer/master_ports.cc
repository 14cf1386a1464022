#include "peer/master_ports.h"

#include "peer/agent_log.h"
#include "peer/peer_address.h"

namespace cairn {

Result<uint16_t> MasterPorts::hold() {
  auto listener = listen_on(PeerAddress{"", 0}, 128);
  if (!listener.ok()) return listener.status();
  const uint16_t port = local_port(listener->get());
  if (port == 0) return Status::Io("no port for the listener: " + errno_text());
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  for (auto it = held_.begin(); it != held_.end();)
    it = it->second.until < now ? held_.erase(it) : std::next(it);
  held_[port] = Held{std::move(*listener), now + kMasterPortHold};
  return port;
}

bool MasterPorts::release(uint16_t port) {
  std::lock_guard lock(mutex_);
  return held_.erase(port) > 0;
}

size_t MasterPorts::held() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

std::optional<Json> answer_master_port(MasterPorts& ports, const Json& request,
                                       const std::string& name) {
  const std::string type = request.value("type", "");
  if (type == "master_port") {
    auto port = ports.hold();
    if (!port.ok()) {
      agent_log("refused a MASTER_PORT for " + name + ": " + port.status().message());
      return Json{{"type", "error"}, {"reason", "no free port: " + port.status().message()}};
    }
    agent_log("holding MASTER_PORT " + std::to_string(*port) + " for " + name);
    return Json{{"type", "master_port"}, {"port", *port}};
  }
  if (type == "master_port_release") {
    const Json port = request.value("port", Json());
    const bool released = port.is_number_unsigned() && port.get<uint64_t>() < 65536 &&
                          ports.release(static_cast<uint16_t>(port.get<uint64_t>()));
    if (released) agent_log("released MASTER_PORT " + port.dump() + " for " + name);
    return Json{{"type", "master_port_released"}, {"port", port}, {"held", released}};
  }
  return std::nullopt;
}

AgentRequestHandler with_master_ports(AgentRequestHandler next) {
  auto ports = std::make_shared<MasterPorts>();
  return [ports, next = std::move(next)](const Json& request, PeerConnection& peer,
                                         const std::string& name) -> std::optional<Json> {
    if (auto answer = answer_master_port(*ports, request, name)) return answer;
    return next ? next(request, peer, name) : std::nullopt;
  };
}

}  // namespace cairn
