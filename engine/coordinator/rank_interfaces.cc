#include "engine/coordinator/rank_interfaces.h"

#include "peer/peer_address.h"
#include "peer/route_probe.h"

namespace cairn {

Status set_collective_interfaces(std::map<std::string, std::string>& env) {
  auto master = env.find("MASTER_ADDR");
  if (master == env.end() || master->second.empty()) return Status::Ok();
  auto loopback = is_loopback_host(master->second);
  if (loopback.ok() && *loopback) return Status::Ok();
  auto route = route_to(master->second);
  if (!route.ok())
    return Status::Failed("MASTER_ADDR " + master->second + ": " + route.status().message());
  if (route->interface.empty())
    return Status::Failed("MASTER_ADDR " + master->second +
                          ": no interface of this machine holds " + route->local_address +
                          ", its address towards it");
  for (const char* name : kCollectiveInterfaceVariables) env.emplace(name, route->interface);
  return Status::Ok();
}

}  // namespace cairn
