#include "engine/coordinator/machine_launchers.h"

namespace cairn {

MachineLaunchers::MachineLaunchers(std::unique_ptr<Launcher> local) {
  machines_.push_back(std::move(local));
}

int MachineLaunchers::add(std::unique_ptr<Launcher> launcher) {
  if (source_) launcher->prepare(source_);
  machines_.push_back(std::move(launcher));
  return size() - 1;
}

void MachineLaunchers::replace(int machine, std::unique_ptr<Launcher> launcher) {
  if (machine <= 0 || machine >= size()) return;
  collect(machine, *machines_[static_cast<size_t>(machine)]);
  if (source_) launcher->prepare(source_);
  machines_[static_cast<size_t>(machine)] = std::move(launcher);
}

void MachineLaunchers::prepare(const std::shared_ptr<const RunSource>& source) {
  source_ = source;
  for (auto& machine : machines_) machine->prepare(source);
}

int MachineLaunchers::machine_of(const LaunchedRank& rank) const {
  if (rank.pid > 0) return 0;
  auto it = remote_.find(rank.pid);
  return it == remote_.end() ? -1 : it->second.machine;
}

Result<LaunchedRank> MachineLaunchers::start(const RankLaunch& launch) {
  if (launch.machine < 0 || launch.machine >= size())
    return Status::Failed("no machine " + std::to_string(launch.machine));
  auto started = machines_[static_cast<size_t>(launch.machine)]->start(launch);
  if (!started.ok() || launch.machine == 0) return started;
  const pid_t outer = next_remote_--;
  remote_[outer] = Remote{launch.machine, *started};
  outer_of_[{launch.machine, started->pid}] = outer;
  return LaunchedRank{outer, 0};
}

LaunchedRank MachineLaunchers::adopted(int machine, LaunchedRank inner) {
  const pid_t outer = next_remote_--;
  remote_[outer] = Remote{machine, inner};
  outer_of_[{machine, inner.pid}] = outer;
  return LaunchedRank{outer, 0};
}

const AgentEndpoint* MachineLaunchers::agent_of(const LaunchedRank& rank) const {
  if (rank.pid > 0) return machines_[0]->agent_of(rank);
  auto it = remote_.find(rank.pid);
  if (it == remote_.end()) return nullptr;
  return machines_[static_cast<size_t>(it->second.machine)]->agent_of(it->second.inner);
}

bool MachineLaunchers::signal(const LaunchedRank& rank, int sig) {
  if (rank.pid > 0) return machines_[0]->signal(rank, sig);
  auto it = remote_.find(rank.pid);
  if (it == remote_.end()) return false;
  return machines_[static_cast<size_t>(it->second.machine)]->signal(it->second.inner, sig);
}

void MachineLaunchers::collect(int machine, Launcher& launcher) {
  for (std::filesystem::path& file : launcher.take_new_outputs())
    new_outputs_.push_back(std::move(file));
  for (RankExit& exit : launcher.take_exits()) {
    if (machine == 0) {
      exits_.push_back(exit);
      continue;
    }
    auto it = outer_of_.find({machine, exit.rank.pid});
    if (it == outer_of_.end()) continue;  // not started through this class: not a rank of ours
    exit.rank = LaunchedRank{it->second, 0};
    remote_.erase(it->second);
    outer_of_.erase(it);
    exits_.push_back(exit);
  }
}

std::vector<RankExit> MachineLaunchers::take_exits() {
  for (int m = 0; m < size(); ++m) collect(m, *machines_[static_cast<size_t>(m)]);
  std::vector<RankExit> exits;
  exits.swap(exits_);
  return exits;
}

std::vector<std::filesystem::path> MachineLaunchers::take_new_outputs() {
  // With those of a replaced launcher, gathered when it was replaced (collect).
  for (auto& machine : machines_)
    for (std::filesystem::path& file : machine->take_new_outputs())
      new_outputs_.push_back(std::move(file));
  std::vector<std::filesystem::path> files;
  files.swap(new_outputs_);
  return files;
}

}  // namespace cairn
