#include "engine/coordinator/local_launcher.h"

#include <signal.h>
#include <sys/wait.h>

namespace cairn {

namespace {

// Whether the process has ended already (not yet reaped): WNOWAIT leaves it for take_exits.
bool has_ended(pid_t pid) {
  siginfo_t si{};
  return ::waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
}

}  // namespace

Result<LaunchedRank> LocalLauncher::start(const RankLaunch& launch) {
  ProcessSpec spec;
  spec.argv = launch.argv;
  spec.cwd = launch.cwd;
  spec.env = launch.env;
  spec.output = launch.output;
  auto process = TrialProcess::spawn(spec);
  if (!process.ok()) return process.status();
  running_.insert(process->pid());
  return LaunchedRank{process->pid(), process->start_time()};
}

bool LocalLauncher::signal(const LaunchedRank& rank, int sig) {
  if (!running_.count(rank.pid)) return false;
  const bool ended = has_ended(rank.pid);
  // The pid is a zombie until take_exits reaps it, so it (and its group's id) is still ours.
  ::kill(-rank.pid, sig);
  return !ended;
}

std::vector<RankExit> LocalLauncher::take_exits() {
  std::vector<RankExit> exits;
  for (;;) {
    // Looked at before it is reaped: while the ended process is a zombie its pid, which is
    // its group's id, cannot be reused, so what is left of its group can be killed.
    siginfo_t ended{};
    if (::waitid(P_ALL, 0, &ended, WEXITED | WNOHANG | WNOWAIT) != 0 || ended.si_pid <= 0) break;
    const bool ours = running_.count(ended.si_pid) > 0;
    if (ours) ::kill(-ended.si_pid, SIGKILL);
    int status = 0;
    const pid_t pid = ::waitpid(ended.si_pid, &status, WNOHANG);
    if (pid <= 0) break;
    if (!ours) continue;
    running_.erase(pid);
    exits.push_back({LaunchedRank{pid, 0}, ExitInfo::from_wait_status(status)});
  }
  return exits;
}

}  // namespace cairn
