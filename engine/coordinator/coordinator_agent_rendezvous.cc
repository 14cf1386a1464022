// The rendezvous check of a gang whose rank 0 runs on an agent (docs/peers.md "Before a gang
// over machines starts"). MASTER_PORT must be free on rank 0's machine, which only that
// machine can say: its agent picks a port and keeps a listener on it (peer/master_ports.h)
// while every other machine of the gang connects to MASTER_ADDR:that port from its side —
// this machine directly, an agent through its probe request — so the check is of the very
// address and port the ranks will use (a gang all on that agent needs no probe, only the
// port). The listener is released before any rank starts (the release precedes rank 0's
// launch on the agent's connection), and the port becomes the trial's MASTER_PORT.
#include <set>

#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/machine_launchers.h"
#include "peer/peer_address.h"
#include "peer/route_probe.h"

namespace cairn {

Status Coordinator::check_agent_rendezvous(const std::vector<SlotRef>& places,
                                           const std::string& master_addr, int* master_port) {
  std::set<int> machines;
  for (const SlotRef& p : places) machines.insert(p.machine);
  const int rank0 = places.front().machine;
  const std::string& rank0_name = machines_[static_cast<size_t>(rank0)].name();
  Launcher& host = launcher_->at(rank0);
  auto held = host.hold_master_port();
  if (!held.ok())
    return Status::Failed("rank 0's machine (" + rank0_name +
                          ") has no free MASTER_PORT: " + held.status().message());
  const uint16_t port = *held;
  Status verdict = Status::Ok();
  for (int m : machines) {
    if (m == rank0) continue;
    Status reached = m == 0 ? probe_tcp(PeerAddress{master_addr, port}, kProbeTimeout)
                            : launcher_->at(m).reach(master_addr, port);
    if (!reached.ok()) {
      verdict = Status::Failed("rank 0's machine (" + rank0_name + ") at " + master_addr + ":" +
                               std::to_string(port) + " cannot be reached from " +
                               machines_[static_cast<size_t>(m)].name() + ": " + reached.message());
      break;
    }
  }
  host.release_master_port(port);
  if (verdict.ok()) *master_port = port;
  return verdict;
}

}  // namespace cairn
