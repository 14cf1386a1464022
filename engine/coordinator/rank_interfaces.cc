#include "engine/coordinator/rank_interfaces.h"

#include <arpa/inet.h>
#include <netinet/in.h>

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

Status check_gang_master_address(const std::string& master_addr, const std::string& machine) {
  const std::string bare = master_addr.substr(0, master_addr.find('%'));
  in6_addr address{};
  if (::inet_pton(AF_INET6, bare.c_str(), &address) != 1 || !IN6_IS_ADDR_LINKLOCAL(&address))
    return Status::Ok();
  return Status::Failed(
      "rank 0's machine (" + machine + ") is reached at the link-local address " + master_addr +
      ": a gang over machines needs an address without a scope (Gloo gives each "
      "rank's address to the others with its own machine's interface index); give the "
      "machines a unique local (fd00::/8) or global IPv6 address, or an IPv4 one, and list "
      "the agents by it");
}

}  // namespace cairn
