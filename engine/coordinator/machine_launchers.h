// Every machine an experiment runs ranks on, as one Launcher (launcher.h): machine 0 is this
// machine (the local launcher), 1… the agents in the order they were listed (a
// RemoteLauncher each). start() goes to the machine RankLaunch::machine names; signals and
// exits are routed back by the rank.
//
// Ranks are named by pid as launcher.h says. A local rank keeps its real pid; a remote rank's
// pid is unique only within its own launcher, so each gets a pid of this class below -1
// (never a pid of this machine), mapped to its machine and its launcher's name for it.
//
// A lost machine (its launcher's lost()) can be given a new launcher with replace() — the
// agent came back — after the old one's ranks have been taken as exits (replace takes them).
//
// Not thread-safe: the coordinator's loop is the only caller.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engine/coordinator/launcher.h"

namespace cairn {

class MachineLaunchers final : public Launcher {
 public:
  explicit MachineLaunchers(std::unique_ptr<Launcher> local);

  // Adds a machine; returns its index.
  int add(std::unique_ptr<Launcher> launcher);
  // Gives machine `machine` (> 0) a new launcher; the old one's remaining exits are kept
  // for the next take_exits().
  void replace(int machine, std::unique_ptr<Launcher> launcher);
  int size() const { return static_cast<int>(machines_.size()); }
  Launcher& at(int machine) { return *machines_.at(static_cast<size_t>(machine)); }
  bool lost(int machine) const { return machines_.at(static_cast<size_t>(machine))->lost(); }
  // The machine a running rank is on; -1 when the rank is not known (it ended).
  int machine_of(const LaunchedRank& rank) const;

  // To every machine, and to one added or replaced later (run_shipping.h).
  void prepare(const std::shared_ptr<const RunSource>& source) override;
  Result<LaunchedRank> start(const RankLaunch& launch) override;
  // A rank machine `machine`'s launcher took without starting it (`inner`, its name for it:
  // a `cairn resume` adopting what an agent kept running), under this class's name.
  LaunchedRank adopted(int machine, LaunchedRank inner);
  bool signal(const LaunchedRank& rank, int sig) override;
  std::vector<RankExit> take_exits() override;
  std::vector<std::filesystem::path> take_new_outputs() override;
  // The agent of the machine the rank runs on (nullptr for this machine's ranks).
  const AgentEndpoint* agent_of(const LaunchedRank& rank) const override;

 private:
  // Exits of one machine's launcher, renamed to this class's pids, and the output files it
  // made.
  void collect(int machine, Launcher& launcher);

  std::vector<std::unique_ptr<Launcher>> machines_;
  std::shared_ptr<const RunSource> source_;  // what prepare() was given
  struct Remote {
    int machine = 0;
    LaunchedRank inner;  // the machine's launcher's name for it
  };
  std::map<pid_t, Remote> remote_;                   // by this class's pid
  std::map<std::pair<int, pid_t>, pid_t> outer_of_;  // (machine, inner pid) → our pid
  pid_t next_remote_ = -2;
  std::vector<RankExit> exits_;
  std::vector<std::filesystem::path> new_outputs_;
};

}  // namespace cairn
