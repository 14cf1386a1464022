// One trial process: started without a shell (argv straight to execve), in its own process
// group (so a Ctrl-C at the terminal reaches cairn, which then asks the trial to checkpoint,
// rather than killing it mid-write), with stdout and stderr merged into one file that cairn
// tails, so the log keeps the order in which the trial wrote. A file rather than a pipe: when
// cairn dies, a trial writing to a pipe would die of SIGPIPE (or BrokenPipeError in Python)
// instead of checkpointing and exiting by itself, and its last output would be lost.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/status.h"

namespace cairn {

struct ProcessSpec {
  std::vector<std::string> argv;
  std::filesystem::path cwd;
  std::map<std::string, std::string> env;  // the complete environment
  std::filesystem::path output;            // stdout+stderr are appended here
};

// How a process ended, in the words `show` and the terminal use.
struct ExitInfo {
  int code = 0;    // exit code, when it exited
  int signal = 0;  // the signal that killed it, when it was killed
  bool ok() const { return code == 0 && signal == 0; }
  std::string describe() const;  // "exited with status 3", "killed by signal 9 (SIGKILL)"
  static ExitInfo from_wait_status(int status);
};

class TrialProcess {
 public:
  // Starts the process.
  static Result<TrialProcess> spawn(const ProcessSpec& spec);

  pid_t pid() const { return pid_; }
  // Identifies the process beyond its pid (pids are reused): start time in clock ticks
  // since boot, from /proc/PID/stat.
  uint64_t start_time() const { return start_time_; }
  // Signals the whole process group.
  void signal_group(int sig) const;

 private:
  pid_t pid_ = -1;
  uint64_t start_time_ = 0;
};

// The current environment as a map (the base of every trial's environment).
std::map<std::string, std::string> current_environment();
// This boot's id (/proc/sys/kernel/random/boot_id), to tell a pid from a previous boot.
std::string boot_id();
std::optional<uint64_t> process_start_time(pid_t pid);
// True when `pid` is alive (a zombie is not) and is the process that started at
// `start_time` in boot `boot`
// (a pid alone may have been reused by another process since).
bool same_process_alive(pid_t pid, uint64_t start_time, const std::string& boot);
// Kills (SIGKILL) what is left of the process group of a trial process that has ended: the
// children it started in its group and left running (a `sleep` it spawned, DataLoader-like
// workers). `leader` started at `start_time`; nothing is sent when that pid is now another,
// live process's. Safe otherwise: a group id stays taken while the group has a member, so a
// group that still exists under the dead leader's id is its own.
void kill_leftover_group(pid_t leader, uint64_t start_time);
// Resolves a bare program name against PATH in `env` the way execvp would, so that a
// missing program is reported before the fork with a clear message.
Result<std::string> resolve_program(const std::string& program, const std::filesystem::path& cwd,
                                    const std::map<std::string, std::string>& env);

}  // namespace cairn
