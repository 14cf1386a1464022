// Placement over this machine and the agents (docs/peers.md "Placement"): which machines a
// trial prefers, where its ranks ran (recorded, so `show` says it and `resume` prefers the
// same machines), rank 0's address for the others, and lost agents.
#include <algorithm>
#include <map>
#include <set>

#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/rank_interfaces.h"
#include "engine/coordinator/trial_state.h"
#include "peer/peer_address.h"
#include "peer/route_probe.h"

namespace cairn {

namespace {

// How often a lost agent is tried again.
constexpr auto kReconnectEvery = std::chrono::seconds(5);

}  // namespace

void Coordinator::watch_machines() {
  const auto now = Clock::now();
  for (int m = 1; m < launcher_->size(); ++m) {
    if (machines_refusing_.count(m)) continue;  // out for this run, lost or not
    auto pending = reconnecting_.find(m);
    if (pending != reconnecting_.end()) {
      if (pending->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) continue;
      auto launcher = pending->second.get();
      reconnecting_.erase(pending);
      if (!launcher.ok()) continue;
      MachineInfo& info = machines_[static_cast<size_t>(m)];
      const RemoteLauncher::Offer offer = (*launcher)->offer();
      // Nothing is held there any more: every rank it ran came back lost (launcher.h).
      info.slots = offer.slots;
      info.gpu_names = offer.gpu_names;
      info.reach_address = offer.agent_address;
      if (machines_[0].reach_address.empty()) machines_[0].reach_address = offer.local_address;
      launcher_->replace(m, std::move(*launcher));
      slots_->set_slots(m, info.slots);
      slots_->set_available(m, true);
      terminal_.note("agent " + info.address + " is back (" + std::to_string(info.slots) +
                     " slots)");
      continue;
    }
    if (!launcher_->lost(m)) continue;
    if (slots_->available(m)) {
      slots_->set_available(m, false);
      const std::string& address = machines_[static_cast<size_t>(m)].address;
      std::string why = launcher_->at(m).lost_reason();
      if (why.rfind(address + ": ", 0) == 0) why = why.substr(address.size() + 2);
      terminal_.warn("warning: lost agent " + address + (why.empty() ? "" : " (" + why + ")") +
                     "; its trials restart on other slots, and it is tried again every " +
                     std::to_string(kReconnectEvery.count()) + " s");
    }
    auto& at = reconnect_at_[m];
    if (now < at) continue;
    at = now + kReconnectEvery;
    reconnecting_[m] = std::async(std::launch::async, reconnect_agent,
                                  machines_[static_cast<size_t>(m)].address, options_.key_file);
  }
}

bool Coordinator::exclude_refusing_machine(int m) {
  if (m <= 0 || m >= launcher_->size()) return false;
  const std::string why = launcher_->at(m).refuses_run();
  if (why.empty()) return false;
  const bool first = machines_refusing_.insert(m).second;
  slots_->set_available(m, false);
  int capacity = 0;
  for (int other = 0; other < slots_->machines(); ++other)
    if (!machines_refusing_.count(other)) capacity += slots_->size(other);
  // Where nothing else can hold the trial, its error says why, once; no warning besides.
  if (capacity < config_.resources.slots_per_trial) return false;
  if (first)
    terminal_.warn("warning: agent " + machines_[static_cast<size_t>(m)].address +
                   " cannot run this experiment (" + why + "); its slots are not used");
  return true;
}

std::vector<int> Coordinator::preferred_machines(const Trial& trial) const {
  // The machine rank 0 ran on last holds the trial's latest checkpoint (and the code).
  std::vector<int> preferred;
  auto add = [&](int m) {
    if (std::find(preferred.begin(), preferred.end(), m) == preferred.end()) preferred.push_back(m);
  };
  for (const Json& place : trial.record.value("placement", Json::array())) {
    const std::string name = place.value("machine", "");
    for (size_t m = 0; m < machines_.size(); ++m)
      if (machines_[m].name() == name) add(static_cast<int>(m));
  }
  // Then the machines that have the experiment's code already (this one, and the agents
  // that ran one of its ranks), the freest first; the others only when those are full.
  std::vector<int> warm(machines_used_.begin(), machines_used_.end());
  if (std::find(warm.begin(), warm.end(), 0) == warm.end()) warm.push_back(0);
  std::stable_sort(warm.begin(), warm.end(),
                   [&](int a, int b) { return slots_->free(a) > slots_->free(b); });
  for (int m : warm) add(m);
  return preferred;
}

Json Coordinator::placement_json(const std::vector<SlotRef>& places) const {
  Json out = Json::array();
  for (size_t r = 0; r < places.size(); ++r)
    out.push_back({{"rank", r},
                   {"machine", machines_[static_cast<size_t>(places[r].machine)].name()},
                   {"slot", places[r].slot}});
  return out;
}

std::string Coordinator::master_address(const std::vector<SlotRef>& places) const {
  const bool one_machine = std::all_of(places.begin(), places.end(), [&](const SlotRef& p) {
    return p.machine == places.front().machine;
  });
  if (places.empty() || one_machine) return "127.0.0.1";
  const std::string& reach = machines_[static_cast<size_t>(places.front().machine)].reach_address;
  return reach.empty() ? "127.0.0.1" : reach;
}

Status Coordinator::check_rendezvous(const std::vector<SlotRef>& places,
                                     const std::string& master_addr, int* master_port) {
  // MASTER_ADDR is loopback unless the gang spans machines (master_address).
  if (Status scoped = check_gang_master_address(
          master_addr, machines_[static_cast<size_t>(places.front().machine)].name());
      !scoped.ok())
    return scoped;
  // Rank 0 on an agent: MASTER_PORT must be free there, also for a gang all on that agent.
  if (places.size() > 1 && places.front().machine != 0)
    return check_agent_rendezvous(places, master_addr, master_port);
  std::set<int> machines;
  for (const SlotRef& p : places) machines.insert(p.machine);
  if (machines.size() < 2) return Status::Ok();
  const int rank0 = places.front().machine;
  uint16_t port = static_cast<uint16_t>(*master_port);
  // Rank 0 here: MASTER_PORT answers while the others try it.
  auto listener = listen_on(PeerAddress{"", port});
  if (!listener.ok())
    return Status::Failed("MASTER_PORT " + std::to_string(port) +
                          " is not free on this machine: " + listener.status().message());
  for (int m : machines) {
    if (m == rank0) continue;
    Status reached = m == 0 ? probe_tcp(PeerAddress{master_addr, port}, kProbeTimeout)
                            : launcher_->at(m).reach(master_addr, port);
    if (!reached.ok())
      return Status::Failed("rank 0's machine (" + machines_[static_cast<size_t>(rank0)].name() +
                            ") at " + master_addr + ":" + std::to_string(port) +
                            " cannot be reached from " + machines_[static_cast<size_t>(m)].name() +
                            ": " + reached.message());
  }
  return Status::Ok();
}

std::string Coordinator::where_started(const Trial& trial) const {
  std::map<int, int> ranks_on;
  for (const Rank& rank : trial.ranks) ++ranks_on[rank.machine];
  if (ranks_on.size() == 1 && ranks_on.begin()->first == 0 && trial.chief().process)
    return "(pid " + std::to_string(trial.chief().process->pid) + ")";
  std::string out;
  for (const auto& [machine, count] : ranks_on) {
    out += (out.empty() ? "on " : ", ") + machines_[static_cast<size_t>(machine)].name();
    if (trial.world_size() > 1) out += " ×" + std::to_string(count);
  }
  return out;
}

}  // namespace cairn
