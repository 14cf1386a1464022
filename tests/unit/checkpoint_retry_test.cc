// Checkpoint transfers tried again over a dropped link (peer/checkpoint_retry.h): which
// failures are the link's, how long a link that stays down is tried, and that a refusal is
// never tried again. The drop in the middle of a 64 MiB transfer, through a proxy killed and
// restarted, is tests/e2e/test_peers_transfer_drops.py.
#include <doctest/doctest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "common/file_util.h"
#include "peer/agent_server.h"
#include "peer/checkpoint_client.h"
#include "peer/checkpoint_retry.h"
#include "peer/cluster_key.h"
#include "peer/peer_address.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct RetryFixture {
  RetryFixture() : key{std::string(32, 'k'), cluster_key_id(std::string(32, 'k'))} {
    ::signal(SIGPIPE, SIG_IGN);
    fs::create_directories(dir / "agent");
    AgentInfo info;
    info.dir = dir / "agent";
    agent = std::make_unique<testing::TestAgent>(key, info);
    auto made = TlsContext::make(TlsContext::Side::kClient, key);
    REQUIRE(made.ok());
    tls = *made;
    endpoint = AgentEndpoint{agent->address(), tls, milliseconds(5000),
                             std::make_shared<std::atomic<bool>>(false)};
  }
  // An endpoint where nothing listens (connections are refused, as by a proxy that is down).
  AgentEndpoint nowhere(milliseconds window) {
    auto listener = listen_on(PeerAddress{"127.0.0.1", 0});
    REQUIRE(listener.ok());
    const uint16_t port = local_port(listener->get());
    listener->reset();
    return AgentEndpoint{PeerAddress{"127.0.0.1", port}, tls, window,
                         std::make_shared<std::atomic<bool>>(false)};
  }
  TestDir dir;
  ClusterKey key;
  std::shared_ptr<TlsContext> tls;
  std::unique_ptr<testing::TestAgent> agent;
  AgentEndpoint endpoint;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST_CASE("checkpoint retry: a link failure is told from a refusal") {
  RetryFixture f;
  TransferTry refused;
  auto stale = fetch_checkpoint(
      f.endpoint, "1.1", 3, (f.dir / "agent/work/nothing").string(),
      [](const std::string&) { return true; }, f.dir / "in",
      [](const FetchedCheckpoint&) { return Status::Ok(); }, &refused);
  REQUIRE_FALSE(stale.ok());
  CHECK(refused.connected);
  CHECK_FALSE(refused.link_failed);

  TransferTry down;
  auto nothing = stage_checkpoint(f.nowhere(milliseconds(0)), "1.1", 1, milliseconds(2000), &down);
  REQUIRE_FALSE(nothing.ok());
  CHECK_FALSE(down.connected);
  CHECK(down.link_failed);
}

TEST_CASE("checkpoint retry: a refusal is answered at once, never tried again") {
  RetryFixture f;
  fs::create_directories(f.dir / "in");
  const auto started = Clock::now();
  auto stale = fetch_checkpoint_retrying(
      f.endpoint, "1.1", 3, (f.dir / "agent/work/nothing").string(),
      [](const std::string&) { return true; }, f.dir / "in",
      [](const FetchedCheckpoint&) { return Status::Ok(); });
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.status().message().find("refused") != std::string::npos);
  CHECK(seconds_since(started) < 2.0);  // the window is 5 s
}

TEST_CASE("checkpoint retry: a link that stays down is tried for the window, then fails") {
  RetryFixture f;
  const auto started = Clock::now();
  auto staged =
      stage_checkpoint_retrying(f.nowhere(milliseconds(600)), "1.1", 1, milliseconds(2000));
  REQUIRE_FALSE(staged.ok());
  CHECK(staged.status().message().find("and the link was not back within 0.6 s") !=
        std::string::npos);
  CHECK(seconds_since(started) >= 0.55);
  CHECK(seconds_since(started) < 3.0);

  // Without a window: tried once.
  const auto once = Clock::now();
  auto single = stage_checkpoint_retrying(f.nowhere(milliseconds(0)), "1.1", 1, milliseconds(2000));
  REQUIRE_FALSE(single.ok());
  CHECK(single.status().message().find("not back") == std::string::npos);
  CHECK(seconds_since(once) < 0.5);
}

TEST_CASE("checkpoint retry: an agent counted lost ends the tries") {
  RetryFixture f;
  AgentEndpoint gone = f.nowhere(milliseconds(10000));
  gone.lost->store(true);
  const auto started = Clock::now();
  auto pushed =
      push_checkpoint_retrying(gone, "1.1", 2, f.dir / "none", WireManifest{}, milliseconds(2000));
  REQUIRE_FALSE(pushed.ok());
  CHECK(pushed.status().message().find("the agent was lost") != std::string::npos);
  CHECK(seconds_since(started) < 1.0);
}

TEST_CASE("checkpoint retry: an agent lost while a transfer connects to it lets it go at once") {
  // A stopped agent: its kernel accepts the connection (the listener's backlog), nothing
  // answers the handshake. Counting it lost must end the connect, not its 10 s timeout.
  RetryFixture f;
  auto listener = listen_on(PeerAddress{"127.0.0.1", 0});
  REQUIRE(listener.ok());
  AgentEndpoint hung{PeerAddress{"127.0.0.1", local_port(listener->get())}, f.tls,
                     milliseconds(10000), std::make_shared<std::atomic<bool>>(false)};
  hung.link_watch = std::make_shared<LinkWatch>();
  const auto started = Clock::now();
  std::thread loser([&] {
    std::this_thread::sleep_for(milliseconds(300));  // the connect is under way by then
    hung.lost->store(true);
    hung.link_watch->release_all();
  });
  auto staged = stage_checkpoint_retrying(hung, "1.1", 2, milliseconds(10000));
  loser.join();
  REQUIRE_FALSE(staged.ok());
  CHECK(seconds_since(started) < 3.0);
}

TEST_CASE("checkpoint retry: transfers that work are unchanged") {
  RetryFixture f;
  auto staged = stage_checkpoint_retrying(f.endpoint, "1.1", 2, milliseconds(5000));
  REQUIRE(staged.ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "w.bin", std::string(3 << 20, 'w')).ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "v.bin", "v").ok());
  fs::create_directories(f.dir / "in");
  size_t kept = 0;
  auto fetched = fetch_checkpoint_retrying(
      f.endpoint, "1.1", 2, *staged, [](const std::string&) { return true; }, f.dir / "in",
      [&](const FetchedCheckpoint& all) {
        kept = all.received.size();
        return Status::Ok();
      });
  REQUIRE(fetched.ok());
  CHECK(kept == 2);
  CHECK(fetched->content_bytes == (3u << 20) + 1);
  // The agent answers checkpoint_dropped before it removes the directory.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (fs::exists(*staged) && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  CHECK_FALSE(fs::exists(*staged));
}

}  // namespace
}  // namespace cairn
