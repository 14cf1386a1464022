// A connection let go by its session (PeerConnection::set_release, docs/peers.md
// "Reattach"): a send blocked on a peer that reads nothing ends at once when the release is
// signalled, not at its deadline; a receive does too; a wake-up byte left over while the
// flag is clear is read and ignored.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "common/file_util.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "tests/unit/tls_pair.h"

namespace cairn {
namespace {

using Clock = std::chrono::steady_clock;

const ClusterKey kKey{std::string(32, 'r'), cluster_key_id(std::string(32, 'r'))};

// Two ends of an authenticated connection in this process.
struct Pair {
  testing::TlsPair tls{kKey};
  std::unique_ptr<PeerConnection>& agent = tls.accepted;
  std::unique_ptr<PeerConnection>& coordinator = tls.connected;
};

struct Wake {
  UniqueFd read, write;
  std::atomic<bool> released{false};
  Wake() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
    read.reset(fds[0]);
    write.reset(fds[1]);
  }
  // As AgentSessions does: the flag first, then the byte.
  void release() {
    released = true;
    const char byte = 1;
    REQUIRE(::write(write.get(), &byte, 1) == 1);
  }
  void stale_byte() {
    const char byte = 1;
    REQUIRE(::write(write.get(), &byte, 1) == 1);
  }
};

TEST_CASE("peer release: a send blocked on a peer that reads nothing lets go at once") {
  ::signal(SIGPIPE, SIG_IGN);
  Pair pair;
  Wake wake;
  pair.agent->set_release(wake.read.get(), &wake.released);
  // 512 KiB frames into a connection whose other end never reads: the socket buffers fill and
  // a send waits (for 60 s, were it not let go).
  const std::string chunk(512 << 10, 'o');
  std::atomic<int64_t> sent{0};
  Status last = Status::Ok();
  Clock::time_point ended;
  std::thread sender([&] {
    for (int i = 0; i < 1024; ++i) {
      Status s = pair.agent->send(Json{{"type", "output"}, {"data", chunk}},
                                  Clock::now() + std::chrono::seconds(60));
      if (!s.ok()) {
        last = s;
        break;
      }
      sent += 1;
    }
    ended = Clock::now();
  });
  // Blocked: no frame has gone for a while (bounded; the socket buffers hold a few MiB).
  int64_t seen = -1;
  auto still_since = Clock::now();
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < give_up) {
    pollfd none{-1, 0, 0};
    ::poll(&none, 0, 100);
    if (sent.load() != seen) {
      seen = sent.load();
      still_since = Clock::now();
    } else if (Clock::now() - still_since > std::chrono::milliseconds(500)) {
      break;
    }
  }
  REQUIRE(sent.load() > 0);
  REQUIRE(sent.load() < 1024);
  const auto released_at = Clock::now();
  wake.release();
  sender.join();
  CAPTURE(last.message());
  CHECK(!last.ok());
  CHECK(last.message().find("released: a new connection resumes its session") != std::string::npos);
  CHECK(last.message().find("sending to") != std::string::npos);
  CHECK(ended - released_at < std::chrono::seconds(5));
}

TEST_CASE("peer release: a receive lets go too; a stale wake-up byte is read and ignored") {
  ::signal(SIGPIPE, SIG_IGN);
  Pair pair;
  Wake wake;
  pair.agent->set_release(wake.read.get(), &wake.released);

  // A byte with the flag clear (left by a release already done): the connection goes on.
  wake.stale_byte();
  REQUIRE(pair.agent->send(Json{{"type", "status"}}, Clock::now() + std::chrono::seconds(10)).ok());
  auto got = pair.coordinator->receive(Clock::now() + std::chrono::seconds(10));
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK((**got)["type"] == "status");
  auto quiet = pair.agent->receive(Clock::now() + std::chrono::milliseconds(300));
  REQUIRE(!quiet.ok());
  CHECK(quiet.status().message() == "timed out");
  char byte;
  CHECK(::read(wake.read.get(), &byte, 1) < 0);  // it was read

  // Released: a receive with a long deadline returns at once.
  wake.release();
  const auto start = Clock::now();
  auto released = pair.agent->receive(Clock::now() + std::chrono::seconds(60));
  REQUIRE(!released.ok());
  CHECK(released.status().message() == "released: a new connection resumes its session");
  CHECK(Clock::now() - start < std::chrono::seconds(5));

  // Without a release descriptor nothing changes: the coordinator's end still works.
  REQUIRE(
      pair.coordinator->send(Json{{"type", "heartbeat"}}, Clock::now() + std::chrono::seconds(10))
          .ok());
}

}  // namespace
}  // namespace cairn
