#include "engine/coordinator/agent_rank_host.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>

#include "common/file_util.h"
#include "engine/coordinator/agent_gc.h"
#include "engine/coordinator/orphan_messages.h"
#include "engine/coordinator/rank_interfaces.h"
#include "engine/coordinator/remote_paths.h"
#include "engine/coordinator/trial_process.h"

namespace cairn {

namespace {

namespace fs = std::filesystem;

// A rank's output pipe holds this much before the rank's writes wait for the agent (Linux's
// default pipe-max-size; where a smaller size is allowed, the pipe keeps its 64 KiB).
constexpr int kOutputPipeBytes = 1 << 20;

class AgentRankHost final : public RankHost {
 public:
  explicit AgentRankHost(fs::path dir) : dir_(std::move(dir)) {}
  ~AgentRankHost() override { kill_all(); }

  Status start(const RemoteLaunch& launch) override {
    if (ranks_.count(launch.rank))
      return Status::BadInput("rank " + std::to_string(launch.rank) + " is already running");
    std::error_code ec;
    const fs::path cwd = dir_ / "work" / launch.cwd;
    fs::create_directories(cwd, ec);
    if (ec) return Status::Io("cannot create " + cwd.string() + ": " + ec.message());
    // Path-valued variables get this machine's paths (remote_paths.h).
    RemoteLaunch resolved = launch;
    if (Status st = resolve_agent_paths(dir_, resolved); !st.ok()) return st;
    // A gang over machines: this machine's interface towards rank 0 (rank_interfaces.h).
    if (Status st = set_collective_interfaces(resolved.env); !st.ok()) return st;
    hold_for_gc(launch);
    // Its trial runs here from before it starts: the GC never takes the trial's orphan
    // directory from under it (agent_gc.h).
    AgentInUse::Token running;
    if (auto trial = launch.env.find("CAIRN_TRIAL_ID"); trial != launch.env.end())
      running = AgentInUse::hold_running_rank(orphan_trial_key(launch.owner, trial->second));
    // stdout and stderr go to a pipe the connection waits on: output is sent as it is
    // written, and no file is made and deleted per rank (docs/peers.md "No polling").
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Status::Io("pipe: " + errno_text());
    UniqueFd read_end(fds[0]), write_end(fds[1]);
    ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);  // the rank's end stays blocking
    ::fcntl(read_end.get(), F_SETPIPE_SZ, kOutputPipeBytes);
    // The spawn opens its output by path: this process's name for the pipe's write end.
    ProcessSpec spec{launch.argv, cwd, resolved.env,
                     "/proc/self/fd/" + std::to_string(write_end.get())};
    auto process = TrialProcess::spawn(spec);
    if (!process.ok()) return process.status();
    Rank rank;
    rank.pid = process->pid();
    rank.start_time = process->start_time();
    rank.output = std::move(read_end);
    // Readable once it ends (Linux 5.3); without it, the connection polls as before.
    rank.ended.reset(static_cast<int>(::syscall(SYS_pidfd_open, rank.pid, 0)));
    rank.running = std::move(running);
    for (const auto& [name, kind] : launch.paths)
      if (kind == "orphans") rank.orphans = resolved.env[name];
    ranks_.emplace(launch.rank, std::move(rank));
    return Status::Ok();
  }

  void signal(int64_t rank, int sig) override {
    auto it = ranks_.find(rank);
    if (it == ranks_.end() || it->second.reaped) return;
    ::kill(-it->second.pid, sig);  // an unreaped pid is still its group's id
  }

  std::vector<Event> poll() override {
    std::vector<Event> events;
    for (auto it = ranks_.begin(); it != ranks_.end();) {
      Rank& rank = it->second;
      if (!rank.reaped) {
        int status = 0;
        if (::waitpid(rank.pid, &status, WNOHANG) == rank.pid) {
          rank.reaped = true;
          rank.exit = ExitInfo::from_wait_status(status);
          kill_leftover_group(rank.pid, rank.start_time);
        }
      }
      // Output first: all of it before the exit.
      bool more = read_output(it->first, rank, events);
      if (rank.reaped && !more) {
        Event ended;
        ended.rank = it->first;
        ended.ended = true;
        ended.code = rank.exit.code;
        ended.signal = rank.exit.signal;
        events.push_back(ended);
        it = ranks_.erase(it);
        continue;
      }
      ++it;
    }
    return events;
  }

  int64_t pid(int64_t id) const override {
    auto it = ranks_.find(id);
    return it == ranks_.end() ? 0 : it->second.pid;
  }

  bool alive(int64_t id) const override {
    auto it = ranks_.find(id);
    if (it == ranks_.end() || it->second.reaped) return false;
    // Ended but not reaped yet (a zombie) is not alive; WNOWAIT leaves it for poll().
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(it->second.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
      return false;
    return info.si_pid != it->second.pid;
  }

  bool event_driven() const override {
    for (const auto& [id, rank] : ranks_)
      if (!rank.reaped && !rank.ended) return false;
    return true;
  }

  std::vector<int> exit_fds() const override {
    std::vector<int> fds;
    for (const auto& [id, rank] : ranks_) {
      if (!rank.reaped && rank.ended) fds.push_back(rank.ended.get());
      if (rank.output) fds.push_back(rank.output.get());  // until its end of file
    }
    return fds;
  }

  void make_orphan_dirs() override {
    for (const auto& [id, rank] : ranks_)
      if (!rank.reaped && !rank.orphans.empty()) (void)make_orphan_dir(rank.orphans);
  }

  void kill_all() override {
    for (auto& [id, rank] : ranks_) {
      if (rank.reaped) continue;
      ::kill(-rank.pid, SIGKILL);
      int status = 0;
      ::waitpid(rank.pid, &status, 0);
    }
    ranks_.clear();
  }

 private:
  struct Rank {
    pid_t pid = -1;
    uint64_t start_time = 0;
    UniqueFd output;  // the pipe's read end (non-blocking), closed at its end of file
    UniqueFd ended;   // a pidfd: readable once the process has ended
    bool reaped = false;
    ExitInfo exit;
    // Its trial has a rank running here until this is gone (erased once reaped and read).
    AgentInUse::Token running;
    fs::path orphans;  // its CAIRN_ORPHAN_DIR, made only when asked for (make_orphan_dirs)
  };

  // Appends at most a few pieces of the output written so far; true when more is left to
  // read now (the pipe stays readable, so the connection's wait returns at once).
  static bool read_output(int64_t id, Rank& rank, std::vector<Event>& events) {
    for (int piece = 0; piece < 4; ++piece) {
      if (!rank.output) return false;
      std::string data(kOutputChunkBytes, '\0');
      const ssize_t n = ::read(rank.output.get(), data.data(), data.size());
      if (n == 0) rank.output.reset();  // every writer closed it: nothing more, ever
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.resize(static_cast<size_t>(n));
      Event event;
      event.rank = id;
      event.output = std::move(data);
      events.push_back(std::move(event));
    }
    return true;
  }

  // What this connection's ranks use is never collected while it lasts (agent_gc.h): the
  // run directory, and the trial's directory (its checkpoints and restored copies).
  void hold_for_gc(const RemoteLaunch& launch) {
    const fs::path rel(launch.cwd);
    auto part = rel.begin();
    if (part != rel.end() && *part == "runs" && ++part != rel.end()) {
      holds_.push_back(AgentInUse::hold_run(part->string()));
      mark_agent_entry_used(dir_ / "work" / "runs" / *part);
    }
    if (auto trial = launch.env.find("CAIRN_TRIAL_ID"); trial != launch.env.end())
      holds_.push_back(AgentInUse::hold_trial(trial->second));
  }

  fs::path dir_;
  std::vector<AgentInUse::Token> holds_;  // released with the connection
  std::map<int64_t, Rank> ranks_;
};

}  // namespace

std::unique_ptr<RankHost> make_agent_rank_host(const fs::path& dir) {
  return std::make_unique<AgentRankHost>(dir);
}

}  // namespace cairn
