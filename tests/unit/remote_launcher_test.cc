// The remote launcher against a real agent server in this process (loopback TCP, TLS 1.3
// with a test key, ranks run by the agent's real rank host): the Launcher contract of
// launcher.h — start, output appended to the local file, exits, signals — over the wire.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>

#include <thread>

#include "common/file_util.h"
#include "engine/coordinator/agent_rank_host.h"
#include "engine/coordinator/remote_launcher.h"
#include "peer/agent_server.h"
#include "peer/peer_address.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

using testing::TestDir;
using Clock = std::chrono::steady_clock;

// An agent that runs ranks under `dir`.
class TestAgent : public testing::TestAgent {
 public:
  TestAgent(const ClusterKey& key, const std::filesystem::path& dir)
      : testing::TestAgent(key, AgentInfo{}, [dir] { return make_agent_rank_host(dir); }) {}
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

TEST_CASE("remote launcher: ranks start on the agent, output and exits come back") {
  ::signal(SIGPIPE, SIG_IGN);
  // The launcher wakes the coordinator with SIGCHLD: default disposition here (ignored),
  // restored at the end.
  struct sigaction old {};
  ::sigaction(SIGCHLD, nullptr, &old);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &dfl, nullptr);
  TestDir dir;
  const ClusterKey key{std::string(32, 'k'), cluster_key_id(std::string(32, 'k'))};
  TestAgent agent(key, dir / "agent");
  auto client = TlsContext::make(TlsContext::Side::kClient, key);
  REQUIRE(client.ok());
  auto launcher = RemoteLauncher::connect(agent.address(), *client, std::chrono::seconds(10),
                                          /*reap_local_children=*/false);
  REQUIRE(launcher.ok());

  RankLaunch launch;
  launch.argv = {"/bin/sh", "-c", "echo out; echo err >&2; pwd; exit 4"};
  launch.env = {{"PATH", "/usr/bin:/bin"}, {"CAIRN_TRIAL_ID", "1.1"}, {"RANK", "0"}};
  launch.cwd = dir.path();
  launch.output = dir / "1.1.out";
  REQUIRE(write_file_atomic(launch.output, "earlier\n").ok());
  auto started = (*launcher)->start(launch);
  REQUIRE(started.ok());
  CHECK(started->pid < -1);
  CHECK(started->start_time == 0);
  auto exits = wait_for_exits(**launcher, 1);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].rank.pid == started->pid);
  CHECK(exits[0].info.code == 4);
  CHECK(exits[0].info.signal == 0);
  // Appended after what the file held, all of it before the exit was reported.
  CHECK(*read_file(launch.output) ==
        "earlier\nout\nerr\n" + (dir / "agent" / "work" / "trials" / "1.1" / "rank-0").string() +
            "\n");
  // Opened when the first byte came, and named for the coordinator to follow.
  CHECK((*launcher)->take_new_outputs() == std::vector<std::filesystem::path>{launch.output});
  CHECK((*launcher)->take_new_outputs().empty());
  CHECK_FALSE((*launcher)->signal(*started, SIGTERM));  // it has ended

  // A signal reaches a running rank; a second rank's exit is its own.
  launch.argv = {"/bin/sleep", "60"};
  launch.env["RANK"] = "1";
  launch.output = dir / "silent" / "1.1-1.out";
  auto sleeper = (*launcher)->start(launch);
  REQUIRE_MESSAGE(sleeper.ok(), sleeper.status().message());
  CHECK(sleeper->pid != started->pid);
  CHECK((*launcher)->signal(*sleeper, SIGTERM));
  exits = wait_for_exits(**launcher, 1);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].rank.pid == sleeper->pid);
  CHECK(exits[0].info.signal == SIGTERM);
  // It printed nothing: neither its output file nor that file's directory was made.
  CHECK_FALSE(std::filesystem::exists(dir / "silent"));
  CHECK((*launcher)->take_new_outputs().empty());

  // A launch the agent refuses ends the rank with status 127, the agent's reason in its
  // output (start() does not wait for the answer).
  launch.argv = {"no-such-program"};
  launch.output = dir / "refused" / "1.1.out";  // its directory too is made
  auto refused = (*launcher)->start(launch);
  REQUIRE(refused.ok());
  exits = wait_for_exits(**launcher, 1);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].rank.pid == refused->pid);
  CHECK(exits[0].info.code == 127);
  CHECK_FALSE(exits[0].machine_lost);
  CHECK(read_file(launch.output)->find("not found on PATH") != std::string::npos);
  CHECK((*launcher)->take_new_outputs() == std::vector<std::filesystem::path>{launch.output});
  ::sigaction(SIGCHLD, &old, nullptr);
}

TEST_CASE("remote launcher: another key is refused at connect, naming the address") {
  ::signal(SIGPIPE, SIG_IGN);
  TestDir dir;
  const ClusterKey key{std::string(32, 'k'), cluster_key_id(std::string(32, 'k'))};
  const ClusterKey other{std::string(32, 'o'), cluster_key_id(std::string(32, 'o'))};
  TestAgent agent(key, dir / "agent");
  auto client = TlsContext::make(TlsContext::Side::kClient, other);
  auto launcher = RemoteLauncher::connect(agent.address(), *client, std::chrono::seconds(10),
                                          /*reap_local_children=*/false);
  REQUIRE_FALSE(launcher.ok());
  CHECK(launcher.status().message().find(agent.address().text() + " refused our cluster key") == 0);
}

}  // namespace
}  // namespace cairn
