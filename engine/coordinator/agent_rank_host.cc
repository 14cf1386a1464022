#include "engine/coordinator/agent_rank_host.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>

#include "common/file_util.h"
#include "engine/coordinator/agent_gc.h"
#include "engine/coordinator/rank_interfaces.h"
#include "engine/coordinator/remote_paths.h"
#include "engine/coordinator/trial_process.h"

namespace cairn {

namespace {

namespace fs = std::filesystem;

std::atomic<uint64_t> g_next_host{1};

class AgentRankHost final : public RankHost {
 public:
  explicit AgentRankHost(fs::path dir) : dir_(std::move(dir)), id_(g_next_host++) {}
  ~AgentRankHost() override { kill_all(); }

  Status start(const RemoteLaunch& launch) override {
    if (ranks_.count(launch.rank))
      return Status::BadInput("rank " + std::to_string(launch.rank) + " is already running");
    std::error_code ec;
    const fs::path cwd = dir_ / "work" / launch.cwd;
    fs::create_directories(cwd, ec);
    if (ec) return Status::Io("cannot create " + cwd.string() + ": " + ec.message());
    fs::create_directories(dir_ / "ranks", ec);
    const fs::path output =
        dir_ / "ranks" / (std::to_string(id_) + "-" + std::to_string(launch.rank) + ".out");
    fs::remove(output, ec);
    // Path-valued variables get this machine's paths (remote_paths.h).
    RemoteLaunch resolved = launch;
    if (Status st = resolve_agent_paths(dir_, resolved); !st.ok()) return st;
    // A gang over machines: this machine's interface towards rank 0 (rank_interfaces.h).
    if (Status st = set_collective_interfaces(resolved.env); !st.ok()) return st;
    hold_for_gc(launch);
    ProcessSpec spec{launch.argv, cwd, resolved.env, output};
    auto process = TrialProcess::spawn(spec);
    if (!process.ok()) return process.status();
    Rank rank;
    rank.pid = process->pid();
    rank.start_time = process->start_time();
    rank.output = output;
    rank.file.reset(::open(output.c_str(), O_RDONLY | O_CLOEXEC));
    // Readable once it ends (Linux 5.3); without it, the connection polls as before.
    rank.ended.reset(static_cast<int>(::syscall(SYS_pidfd_open, rank.pid, 0)));
    // Every write to the output file wakes the connection (what was written before the
    // watch is read by the next poll(), which always follows a start).
    rank.watch = watch_output(output);
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
    drain_wakes();
    bool more_output = false;
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
      if (more) more_output = true;
      if (rank.reaped && !more) {
        Event ended;
        ended.rank = it->first;
        ended.ended = true;
        ended.code = rank.exit.code;
        ended.signal = rank.exit.signal;
        events.push_back(ended);
        std::error_code ec;
        fs::remove(rank.output, ec);
        unwatch(rank);
        it = ranks_.erase(it);
        continue;
      }
      ++it;
    }
    // Output left for the next call (a rank that writes faster than a call sends): the
    // eventfd keeps the connection's wait from sleeping on it.
    if (more_output && more_) {
      const uint64_t one = 1;
      (void)!::write(more_.get(), &one, sizeof one);
    }
    return events;
  }

  bool event_driven() const override {
    if (!inotify_ || !more_) return false;
    for (const auto& [id, rank] : ranks_)
      if (!rank.reaped && (!rank.ended || rank.watch < 0)) return false;
    return true;
  }

  std::vector<int> exit_fds() const override {
    std::vector<int> fds;
    for (const auto& [id, rank] : ranks_)
      if (!rank.reaped && rank.ended) fds.push_back(rank.ended.get());
    if (inotify_ && !ranks_.empty()) fds.push_back(inotify_.get());
    if (more_ && !ranks_.empty()) fds.push_back(more_.get());
    return fds;
  }

  void kill_all() override {
    for (auto& [id, rank] : ranks_) {
      if (rank.reaped) continue;
      ::kill(-rank.pid, SIGKILL);
      int status = 0;
      ::waitpid(rank.pid, &status, 0);
      std::error_code ec;
      fs::remove(rank.output, ec);
    }
    for (auto& [id, rank] : ranks_) unwatch(rank);
    ranks_.clear();
  }

 private:
  struct Rank {
    pid_t pid = -1;
    uint64_t start_time = 0;
    fs::path output;
    UniqueFd file;
    UniqueFd ended;  // a pidfd: readable once the process has ended
    int watch = -1;  // the output file's inotify watch
    bool reaped = false;
    ExitInfo exit;
  };

  // Appends at most a few pieces of new output; true when more is left to read.
  static bool read_output(int64_t id, Rank& rank, std::vector<Event>& events) {
    if (!rank.file) return false;
    for (int piece = 0; piece < 4; ++piece) {
      std::string data(kOutputChunkBytes, '\0');
      const ssize_t n = ::read(rank.file.get(), data.data(), data.size());
      if (n <= 0) return false;
      data.resize(static_cast<size_t>(n));
      Event event;
      event.rank = id;
      event.output = std::move(data);
      events.push_back(std::move(event));
    }
    return true;
  }

  // An inotify watch for writes to `output` (made with the host's inotify descriptor, and
  // its eventfd, at the first start); -1 when there is none (the limit of inotify
  // instances or watches reached): the connection then looks every 20 ms, as before.
  int watch_output(const fs::path& output) {
    if (!inotify_ && !inotify_failed_) {
      inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
      more_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
      inotify_failed_ = !inotify_ || !more_;
    }
    if (!inotify_) return -1;
    return ::inotify_add_watch(inotify_.get(), output.c_str(), IN_MODIFY);
  }

  void unwatch(Rank& rank) {
    if (rank.watch >= 0 && inotify_) ::inotify_rm_watch(inotify_.get(), rank.watch);
    rank.watch = -1;
  }

  // Empties the wake descriptors: what woke the connection is read below, whatever it was.
  void drain_wakes() {
    alignas(inotify_event) char buffer[4096];
    if (inotify_)
      while (::read(inotify_.get(), buffer, sizeof buffer) > 0) {
      }
    uint64_t count = 0;
    if (more_) (void)!::read(more_.get(), &count, sizeof count);
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
  uint64_t id_;
  std::vector<AgentInUse::Token> holds_;  // released with the connection
  UniqueFd inotify_;                      // IN_MODIFY of every running rank's output file
  UniqueFd more_;                         // an eventfd: readable while output is left to read
  bool inotify_failed_ = false;
  std::map<int64_t, Rank> ranks_;
};

}  // namespace

std::unique_ptr<RankHost> make_agent_rank_host(const fs::path& dir) {
  return std::make_unique<AgentRankHost>(dir);
}

}  // namespace cairn
