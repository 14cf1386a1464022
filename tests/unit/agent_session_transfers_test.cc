// The agent's side of a checkpoint transfer is let go with its coordinator's session
// connection (peer/agent_sessions.h watch_transfer, release_transfers): a transfer
// connection that named the session ends its wait at once when the session's connection
// ends, with a line that says why; one that named it afterwards waits for the next end; an
// unknown session watches nothing. The silent link end to end (an agent behind a frozen
// proxy) is tests/e2e/test_peers_transfer_drops.py.
#include <doctest/doctest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "peer/agent_sessions.h"
#include "peer/cluster_key.h"
#include "tests/unit/tls_pair.h"

namespace cairn {
namespace {

using Clock = std::chrono::steady_clock;

const ClusterKey kKey{std::string(32, 't'), cluster_key_id(std::string(32, 't'))};

// What a receive on the agent's end of `pair` gives within `wait` (the other end sends
// nothing), and how long it took.
std::pair<Status, Clock::duration> wait_on(testing::TlsPair& pair, std::chrono::seconds wait) {
  const auto started = Clock::now();
  auto got = pair.accepted->receive(started + wait);
  return {got.ok() ? Status::Ok() : got.status(), Clock::now() - started};
}

TEST_CASE("agent sessions: a transfer that names a session is let go when its connection ends") {
  ::signal(SIGPIPE, SIG_IGN);
  std::atomic<int> running{0};
  AgentSessions sessions(running);
  auto session = std::make_shared<AgentSession>();
  auto id = sessions.open(session, "host:/store#1", std::chrono::seconds(60));
  REQUIRE(id.ok());

  // An unknown session, or none: nothing is watched (the wire's timeouts bound the transfer).
  testing::TlsPair unknown(kKey);
  CHECK(sessions.watch_transfer("0123456789abcdef0123456789abcdef", *unknown.accepted) == nullptr);
  CHECK(sessions.watch_transfer("", *unknown.accepted) == nullptr);

  testing::TlsPair before(kKey);
  auto watched = sessions.watch_transfer(*id, *before.accepted);
  REQUIRE(watched != nullptr);
  // Nothing released yet: the wait runs to its deadline.
  auto [quiet, quiet_took] = wait_on(before, std::chrono::seconds(1));
  CHECK(quiet.message() == "timed out");

  // The session's connection ends (its thread calls this whatever the end): the transfer's
  // wait ends at once, saying why.
  sessions.release_transfers(*session);
  auto [released, took] = wait_on(before, std::chrono::seconds(30));
  CHECK(released.message() == "released: its coordinator's session connection ended");
  CHECK(took < std::chrono::seconds(5));

  // A transfer that names the session from now on belongs to its next connection.
  testing::TlsPair after(kKey);
  auto later = sessions.watch_transfer(*id, *after.accepted);
  REQUIRE(later != nullptr);
  auto [still, still_took] = wait_on(after, std::chrono::seconds(1));
  CHECK(still.message() == "timed out");
  sessions.release_transfers(*session);
  auto [next, next_took] = wait_on(after, std::chrono::seconds(30));
  CHECK(next.message() == "released: its coordinator's session connection ended");
  sessions.end(session);
}

}  // namespace
}  // namespace cairn
