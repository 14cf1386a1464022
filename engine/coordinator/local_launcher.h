// Ranks as processes of this machine (trial_process.h): started without a shell in their own
// process group, their output appended to a file. Exits are collected by waiting for this
// process's children; a child that is not a rank (anything else cairn started) is reaped and
// ignored, as no one else waits for it.
//
// Not thread-safe: the coordinator's event loop is the only caller.
#pragma once

#include <set>

#include "engine/coordinator/launcher.h"

namespace cairn {

class LocalLauncher final : public Launcher {
 public:
  Result<LaunchedRank> start(const RankLaunch& launch) override;
  bool signal(const LaunchedRank& rank, int sig) override;
  std::vector<RankExit> take_exits() override;

 private:
  std::set<pid_t> running_;  // started, not yet reported by take_exits
};

}  // namespace cairn
