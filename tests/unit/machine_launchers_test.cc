#include "engine/coordinator/machine_launchers.h"

#include <doctest/doctest.h>

#include <csignal>

namespace cairn {

namespace {

// A launcher that records what it is asked and ends ranks when told; its own pids may
// collide with another's, as two agents' names for their ranks do.
class FakeLauncher final : public Launcher {
 public:
  explicit FakeLauncher(pid_t first) : next_(first) {}
  Result<LaunchedRank> start(const RankLaunch& launch) override {
    machines_seen.push_back(launch.machine);
    running.push_back(next_);
    return LaunchedRank{next_--, 0};
  }
  bool signal(const LaunchedRank& rank, int sig) override {
    signals.emplace_back(rank.pid, sig);
    return true;
  }
  std::vector<RankExit> take_exits() override { return std::exchange(exits, {}); }
  bool lost() const override { return gone; }

  void end(pid_t pid, bool machine_lost = false) {
    ExitInfo info;
    info.signal = SIGKILL;
    exits.push_back({LaunchedRank{pid, 0}, info, machine_lost});
  }

  std::vector<int> machines_seen;
  std::vector<pid_t> running;
  std::vector<std::pair<pid_t, int>> signals;
  std::vector<RankExit> exits;
  bool gone = false;

 private:
  pid_t next_;
};

}  // namespace

TEST_CASE("ranks go to the machine their launch names; remote names never collide") {
  auto local = std::make_unique<FakeLauncher>(4000);
  auto a = std::make_unique<FakeLauncher>(-2);
  auto b = std::make_unique<FakeLauncher>(-2);  // the same names as a's
  FakeLauncher *lp = local.get(), *ap = a.get(), *bp = b.get();
  MachineLaunchers machines(std::move(local));
  CHECK(machines.add(std::move(a)) == 1);
  CHECK(machines.add(std::move(b)) == 2);

  RankLaunch launch;
  launch.machine = 0;
  auto here = machines.start(launch);
  launch.machine = 1;
  auto on_a = machines.start(launch);
  launch.machine = 2;
  auto on_b = machines.start(launch);
  REQUIRE(here.ok());
  REQUIRE(on_a.ok());
  REQUIRE(on_b.ok());
  CHECK(here->pid == 4000);  // a local rank keeps its real pid
  CHECK(on_a->pid < -1);
  CHECK(on_b->pid < -1);
  CHECK(on_a->pid != on_b->pid);
  CHECK(machines.machine_of(*here) == 0);
  CHECK(machines.machine_of(*on_a) == 1);
  CHECK(machines.machine_of(*on_b) == 2);
  launch.machine = 3;
  CHECK_FALSE(machines.start(launch).ok());

  // Signals reach the launcher that started the rank, under its own name for it.
  CHECK(machines.signal(*on_b, SIGTERM));
  REQUIRE(bp->signals.size() == 1);
  CHECK(bp->signals[0] == std::make_pair(pid_t{-2}, SIGTERM));
  CHECK(ap->signals.empty());

  // Exits come back under the names start() gave, once.
  bp->end(-2, /*machine_lost=*/true);
  lp->end(4000);
  auto exits = machines.take_exits();
  REQUIRE(exits.size() == 2);
  bool saw_b = false, saw_local = false;
  for (const RankExit& exit : exits) {
    if (exit.rank.pid == on_b->pid) saw_b = exit.machine_lost;
    if (exit.rank.pid == 4000) saw_local = !exit.machine_lost;
  }
  CHECK(saw_b);
  CHECK(saw_local);
  CHECK(machines.machine_of(*on_b) == -1);
  CHECK(machines.take_exits().empty());
  CHECK_FALSE(machines.signal(*on_b, SIGKILL));  // ended: not known any more
}

TEST_CASE("a lost machine's last exits survive its replacement") {
  auto a = std::make_unique<FakeLauncher>(-2);
  FakeLauncher* ap = a.get();
  MachineLaunchers machines(std::make_unique<FakeLauncher>(100));
  machines.add(std::move(a));
  RankLaunch launch;
  launch.machine = 1;
  auto rank = machines.start(launch);
  REQUIRE(rank.ok());
  ap->gone = true;
  CHECK(machines.lost(1));
  ap->end(-2, true);
  machines.replace(1, std::make_unique<FakeLauncher>(-2));
  CHECK_FALSE(machines.lost(1));
  auto exits = machines.take_exits();
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].rank.pid == rank->pid);
  CHECK(exits[0].machine_lost);
}

}  // namespace cairn
