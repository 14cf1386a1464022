// The agent relays a rank's output as it is written, woken by the write itself (the rank's
// output is a pipe in the connection's poll set), not by looking every few milliseconds
// (docs/peers.md "No polling").
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>

#include <cstdio>

#include <chrono>
#include <string>
#include <vector>

#include "engine/coordinator/agent_rank_host.h"
#include "test_dir.h"

namespace cairn {
namespace {

using Clock = std::chrono::steady_clock;
using testing::TestDir;

// Waits on the host's descriptors as the agent's connection does; true when one woke.
bool woken(RankHost& host, int timeout_ms) {
  std::vector<pollfd> fds;
  for (int fd : host.exit_fds()) fds.push_back({fd, POLLIN, 0});
  REQUIRE_FALSE(fds.empty());
  return ::poll(fds.data(), fds.size(), timeout_ms) > 0;
}

std::string output_of(const std::vector<RankHost::Event>& events, bool* ended = nullptr) {
  std::string out;
  for (const auto& e : events) {
    out += e.output;
    if (ended && e.ended) *ended = true;
  }
  return out;
}

TEST_CASE("agent rank host: output wakes the connection when written, and nothing else does") {
  TestDir dir;
  auto host = make_agent_rank_host(dir.path());
  RemoteLaunch launch;
  launch.rank = 3;
  launch.cwd = "w";
  launch.env = {{"PATH", "/usr/bin:/bin"}};
  // Writes a line, waits for the test's go (a file), writes another, then idles.
  const std::string go = (dir / "go").string();
  launch.argv = {"/bin/sh", "-c",
                 "echo first; while [ ! -e '" + go +
                     "' ]; do sleep 0.01; done; echo second; "
                     "sleep 30"};
  REQUIRE(host->start(launch).ok());
  CHECK(host->event_driven());
  // The first line: waited for on the descriptors alone.
  std::string out;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (out.find("first\n") == std::string::npos && Clock::now() < deadline) {
    (void)woken(*host, 1000);
    out += output_of(host->poll());
  }
  CHECK(out == "first\n");
  // Nothing written: nothing wakes the wait (no 20 ms ticks).
  CHECK_FALSE(woken(*host, 300));
  CHECK(host->poll().empty());
  // A write wakes it at once, and the poll that follows has the line.
  {
    std::FILE* f = std::fopen(go.c_str(), "w");
    REQUIRE(f);
    std::fclose(f);
  }
  const auto before = Clock::now();
  out.clear();
  while (out.find("second\n") == std::string::npos && Clock::now() < deadline) {
    REQUIRE(woken(*host, 5000));
    out += output_of(host->poll());
  }
  CHECK(out == "second\n");
  CHECK(Clock::now() - before < std::chrono::seconds(3));
  CHECK_FALSE(woken(*host, 200));
  // Its end wakes it too, after all of its output.
  host->signal(3, SIGKILL);
  REQUIRE(woken(*host, 5000));
  bool ended = false;
  for (int i = 0; i < 50 && !ended; ++i) {
    (void)output_of(host->poll(), &ended);
    if (!ended) (void)woken(*host, 100);
  }
  CHECK(ended);
}

TEST_CASE("agent rank host: output beyond one poll keeps the wait awake until it is read") {
  TestDir dir;
  auto host = make_agent_rank_host(dir.path());
  RemoteLaunch launch;
  launch.rank = 1;
  launch.cwd = "w";
  launch.env = {{"PATH", "/usr/bin:/bin"}};
  // 1 MiB at once, far more than one poll() sends (4 pieces of 64 KiB), then idles.
  launch.argv = {"/bin/sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' x; sleep 30"};
  REQUIRE(host->start(launch).ok());
  size_t got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (got < 1048576 && Clock::now() < deadline) {
    REQUIRE(woken(*host, 5000));  // never left asleep with output unread
    got += output_of(host->poll()).size();
  }
  CHECK(got == 1048576);
  host->kill_all();
}

}  // namespace
}  // namespace cairn
