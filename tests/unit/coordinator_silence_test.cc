// An agent drops a connection whose ranks run and whose coordinator went silent
// (peer/coordinator_silence.h): a real agent server in this process, real ranks, a raw
// client that launches and then says nothing, and one that keeps sending heartbeats.
#include "peer/coordinator_silence.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>

#include <string>
#include <thread>

#include "common/file_util.h"
#include "engine/coordinator/agent_rank_host.h"
#include "peer/agent_client.h"
#include "peer/agent_server.h"
#include "peer/rank_messages.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;
using Clock = std::chrono::steady_clock;

const ClusterKey kKey{std::string(32, 's'), cluster_key_id(std::string(32, 's'))};

// Sets CAIRN_HEARTBEAT_TIMEOUT for the scope (unset: nullptr), as it was after.
class HeartbeatTimeout {
 public:
  explicit HeartbeatTimeout(const char* value) {
    if (const char* old = std::getenv("CAIRN_HEARTBEAT_TIMEOUT")) old_ = old;
    had_ = std::getenv("CAIRN_HEARTBEAT_TIMEOUT") != nullptr;
    if (value)
      ::setenv("CAIRN_HEARTBEAT_TIMEOUT", value, 1);
    else
      ::unsetenv("CAIRN_HEARTBEAT_TIMEOUT");
  }
  ~HeartbeatTimeout() {
    if (had_)
      ::setenv("CAIRN_HEARTBEAT_TIMEOUT", old_.c_str(), 1);
    else
      ::unsetenv("CAIRN_HEARTBEAT_TIMEOUT");
  }

 private:
  std::string old_;
  bool had_ = false;
};

class SilenceTestAgent : public testing::TestAgent {
 public:
  explicit SilenceTestAgent(const fs::path& dir)
      : TestAgent(kKey, info(dir), [dir] { return make_agent_rank_host(dir); }) {}

 private:
  static AgentInfo info(const fs::path& dir) {
    AgentInfo info;
    info.slots_total = 2;
    info.dir = dir;
    return info;
  }
};

// Launches a rank that writes its pid to `pid_file` and sleeps; returns its pid.
pid_t launch_sleeper(PeerConnection& peer, const fs::path& pid_file) {
  RemoteLaunch launch{2,
                      {"/bin/sh", "-c", "echo $$ > '" + pid_file.string() + "'; exec sleep 60"},
                      {{"PATH", "/usr/bin:/bin"}},
                      "silence"};
  REQUIRE(peer.send(launch_message(launch), Clock::now() + std::chrono::seconds(5)).ok());
  auto answer = peer.receive(Clock::now() + std::chrono::seconds(10));
  REQUIRE(answer.ok());
  REQUIRE(answer->has_value());
  REQUIRE((**answer)["type"] == "launched");
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    auto text = read_file(pid_file);
    if (text.ok() && !text->empty() && text->back() == '\n') return std::stoi(*text);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL("the rank never wrote its pid");
  return -1;
}

bool alive(pid_t pid) {
  return ::kill(pid, 0) == 0;
}

TEST_CASE("coordinator silence: the limit is CAIRN_HEARTBEAT_TIMEOUT, else 10 s") {
  {
    HeartbeatTimeout unset(nullptr);
    CHECK(coordinator_silence_limit() == std::chrono::seconds(10));
  }
  {
    HeartbeatTimeout set("2.5");
    CHECK(coordinator_silence_limit() == std::chrono::milliseconds(2500));
  }
  for (const char* bad : {"0", "-1", "x", "", "90000"}) {
    HeartbeatTimeout set(bad);
    CHECK(coordinator_silence_limit() == std::chrono::seconds(10));
  }
}

TEST_CASE(
    "coordinator silence: a silent connection's ranks are killed, a heartbeating one's kept") {
  ::signal(SIGPIPE, SIG_IGN);
  HeartbeatTimeout limit("0.5");
  TestDir dir;
  SilenceTestAgent agent(dir / "agent");
  auto client = TlsContext::make(TlsContext::Side::kClient, kKey);
  REQUIRE(client.ok());
  PeerFailure failure;
  auto silent =
      connect_to_agent(agent.address(), *client, Clock::now() + std::chrono::seconds(10), &failure);
  REQUIRE(silent.ok());
  auto talking =
      connect_to_agent(agent.address(), *client, Clock::now() + std::chrono::seconds(10), &failure);
  REQUIRE(talking.ok());
  const pid_t quiet_rank = launch_sleeper(**silent, dir / "silent.pid");
  const pid_t kept_rank = launch_sleeper(**talking, dir / "talking.pid");
  // For 3 s (6 × the limit), one client asks for a heartbeat every 100 ms, the other
  // says nothing.
  bool silent_closed = false;
  const auto until = Clock::now() + std::chrono::seconds(3);
  while (Clock::now() < until) {
    REQUIRE(
        (*talking)->send(Json{{"type", "heartbeat"}}, Clock::now() + std::chrono::seconds(5)).ok());
    auto beat = (*talking)->receive(Clock::now() + std::chrono::seconds(5));
    REQUIRE(beat.ok());
    REQUIRE(beat->has_value());
    CHECK((**beat)["type"] == "heartbeat");
    if (!silent_closed) {
      auto said = (*silent)->receive(Clock::now());
      silent_closed = !said.ok() ? said.status().message() != "timed out" : !said->has_value();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(silent_closed);
  // The silent connection's rank was killed (and reaped); the other still runs.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (alive(quiet_rank) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK_FALSE(alive(quiet_rank));
  CHECK(alive(kept_rank));
}

}  // namespace
}  // namespace cairn
