#include "engine/coordinator/agent_rank_host.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>

#include "common/file_util.h"
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
        std::error_code ec;
        fs::remove(rank.output, ec);
        it = ranks_.erase(it);
        continue;
      }
      ++it;
    }
    return events;
  }

  std::vector<int> exit_fds() const override {
    std::vector<int> fds;
    for (const auto& [id, rank] : ranks_)
      if (!rank.reaped && rank.ended) fds.push_back(rank.ended.get());
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
    ranks_.clear();
  }

 private:
  struct Rank {
    pid_t pid = -1;
    uint64_t start_time = 0;
    fs::path output;
    UniqueFd file;
    UniqueFd ended;  // a pidfd: readable once the process has ended
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

  fs::path dir_;
  uint64_t id_;
  std::map<int64_t, Rank> ranks_;
};

}  // namespace

std::unique_ptr<RankHost> make_agent_rank_host(const fs::path& dir) {
  return std::make_unique<AgentRankHost>(dir);
}

}  // namespace cairn
