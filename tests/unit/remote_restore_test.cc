// A checkpoint restored on an agent before a rank's launch, off the coordinator's loop
// (remote_launcher.h, docs/peers.md "Restoring"): start() returns at once while the restore
// crosses the wire, the launch follows only once the checkpoint is on the agent, a rank
// signalled meanwhile ends by that signal and never runs, and a restore that fails ends the
// rank as a refused launch does. The agent is reached through a gate of this test (a TCP
// forwarder that holds every connection after the first until it is opened), so the restore
// waits exactly as long as the test says.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

#include "common/file_util.h"
#include "engine/coordinator/agent_rank_host.h"
#include "engine/coordinator/remote_launcher.h"
#include "peer/peer_address.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;
using Clock = std::chrono::steady_clock;

// Forwards TCP connections to `to`; every connection after the first waits until open().
class Gate {
 public:
  explicit Gate(PeerAddress to) : to_(std::move(to)) {
    auto listener = listen_on(PeerAddress{"127.0.0.1", 0});
    REQUIRE(listener.ok());
    listener_ = std::move(*listener);
    port_ = local_port(listener_.get());
    accepting_ = std::thread([this] { accept_loop(); });
  }
  ~Gate() {
    stop_ = true;
    open();
    accepting_.join();
    for (std::thread& t : pumps_) t.join();
  }
  PeerAddress address() const { return PeerAddress{"127.0.0.1", port_}; }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }
  int held() const { return held_.load(); }

 private:
  void accept_loop() {
    int accepted = 0;
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!client) continue;
      const bool first = accepted++ == 0;
      pumps_.emplace_back([this, first, client = std::move(client)]() mutable {
        if (!first) {
          ++held_;
          std::unique_lock lock(mutex_);
          opened_.wait(lock, [&] { return open_; });
        }
        if (stop_) return;
        auto server = connect_to(to_, Clock::now() + std::chrono::seconds(5));
        if (!server.ok()) return;
        pump(client.get(), server->get());
      });
    }
  }
  void pump(int a, int b) {
    char buf[65536];
    pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    while (!stop_) {
      if (::poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
        if (n <= 0) return;
        if (!write_all(p[1 - i].fd, std::string_view(buf, static_cast<size_t>(n))).ok()) return;
      }
    }
  }

  PeerAddress to_;
  UniqueFd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> held_{0};
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
  std::thread accepting_;
  std::list<std::thread> pumps_;
};

std::vector<RankExit> wait_for_exits(Launcher& launcher, size_t count) {
  std::vector<RankExit> all;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (all.size() < count && Clock::now() < deadline) {
    for (RankExit& e : launcher.take_exits()) all.push_back(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return all;
}

void wait_held(const Gate& gate, int n) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (gate.held() < n && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(gate.held() >= n);
}

TEST_CASE("remote launcher: a restore runs off the caller's thread, then the launch") {
  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction old {};
  ::sigaction(SIGCHLD, nullptr, &old);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;  // the launcher wakes the coordinator with SIGCHLD: ignored here
  ::sigaction(SIGCHLD, &dfl, nullptr);
  TestDir dir;
  const ClusterKey key{std::string(32, 'k'), cluster_key_id(std::string(32, 'k'))};
  AgentInfo info;
  info.dir = dir / "agent";
  fs::create_directories(info.dir);
  testing::TestAgent agent(key, info, [d = info.dir] { return make_agent_rank_host(d); });
  Gate gate(agent.address());
  auto client = TlsContext::make(TlsContext::Side::kClient, key);
  REQUIRE(client.ok());
  auto launcher = RemoteLauncher::connect(gate.address(), *client, std::chrono::seconds(10),
                                          /*reap_local_children=*/false);
  REQUIRE(launcher.ok());
  fs::create_directories(dir / "ckpt");
  REQUIRE(write_file_atomic(dir / "ckpt/w", "weights").ok());

  RankLaunch launch;
  launch.argv = {"/bin/sh", "-c", "touch \"$0\"; cat \"$CAIRN_LATEST_CHECKPOINT/w\"; exit 3",
                 (dir / "ran-0").string()};
  launch.env = {{"PATH", "/usr/bin:/bin"},
                {"CAIRN_TRIAL_ID", "1.1"},
                {"RANK", "0"},
                {"CAIRN_ATTEMPT", "2"},
                {"CAIRN_LATEST_CHECKPOINT", (dir / "ckpt").string()}};
  launch.cwd = dir.path();
  launch.output = dir / "0.out";
  // The restore's connection waits at the gate: start() has returned all the same.
  auto started = (*launcher)->start(launch);
  REQUIRE(started.ok());
  wait_held(gate, 1);
  CHECK((*launcher)->take_exits().empty());
  CHECK_FALSE(fs::exists(dir / "ran-0"));  // not launched before its checkpoint is there

  // A second rank signalled while its restore waits: it ends by that signal, never runs. (Of
  // the same restore, it waits for rank 0's push rather than pushing again: restore_pushes.h.)
  launch.argv[3] = (dir / "ran-1").string();
  launch.env["RANK"] = "1";
  launch.output = dir / "1.out";
  auto killed = (*launcher)->start(launch);
  REQUIRE(killed.ok());
  CHECK((*launcher)->signal(*killed, SIGKILL));
  auto exits = wait_for_exits(**launcher, 1);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].rank.pid == killed->pid);
  CHECK(exits[0].info.signal == SIGKILL);
  CHECK_FALSE((*launcher)->signal(*killed, SIGKILL));  // it has ended

  // The gate opens: rank 0's checkpoint arrives, then its launch; it reads the agent's copy.
  gate.open();
  exits = wait_for_exits(**launcher, 1);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].rank.pid == started->pid);
  CHECK(exits[0].info.code == 3);
  CHECK(*read_file(dir / "0.out") == "weights");
  CHECK(fs::exists(dir / "ran-0"));
  CHECK_FALSE(fs::exists(dir / "ran-1"));

  // A restore that fails (a link in the checkpoint) ends the rank as a refused launch does.
  fs::create_symlink("/etc/passwd", dir / "ckpt/leak");
  launch.env["CAIRN_ATTEMPT"] = "3";  // a new attempt restores again
  launch.argv[3] = (dir / "ran-2").string();
  launch.output = dir / "2.out";
  auto refused = (*launcher)->start(launch);
  REQUIRE(refused.ok());
  exits = wait_for_exits(**launcher, 1);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].rank.pid == refused->pid);
  CHECK(exits[0].info.code == 127);
  CHECK(read_file(dir / "2.out")->find("cairn: cannot restore the checkpoint on 127.0.0.1:") == 0);
  CHECK_FALSE(fs::exists(dir / "ran-2"));
  launcher->reset();
  ::sigaction(SIGCHLD, &old, nullptr);
}

}  // namespace
}  // namespace cairn
