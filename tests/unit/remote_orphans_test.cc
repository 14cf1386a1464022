// Orphans on an agent (engine/coordinator/remote_orphans.h, docs/peers.md "Orphans on an
// agent"): listing, fetching only what the store lacks, and dropping, against an agent server
// in this process (loopback TCP, TLS 1.3 with a test key); what is not an orphan directory, or
// leads out, is never listed or sent.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "common/sha256.h"
#include "engine/coordinator/agent_gc.h"
#include "engine/coordinator/orphan_messages.h"
#include "engine/coordinator/remote_orphan_wait.h"
#include "engine/coordinator/remote_orphans.h"
#include "peer/peer_address.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;

const std::string kOwner = "gpu1:/home/u/store#1";

struct OrphanFixture {
  OrphanFixture() : key{std::string(32, 'k'), cluster_key_id(std::string(32, 'k'))} {
    ::signal(SIGPIPE, SIG_IGN);
    fs::create_directories(dir.path() / "agent");
    AgentInfo info;
    info.dir = dir.path() / "agent";
    agent = std::make_unique<testing::TestAgent>(
        key, info, RankHostFactory{}, [&](AgentServer& server) {
          server.set_request_handler(with_orphan_requests(dir.path() / "agent", nullptr));
        });
    auto tls = TlsContext::make(TlsContext::Side::kClient, key);
    REQUIRE(tls.ok());
    endpoint = AgentEndpoint{agent->address(), *tls};
  }
  fs::path orphans(const std::string& owner = kOwner, int64_t attempt = 1) const {
    return dir.path() / "agent" / "orphans" / orphan_owner_dir(owner) / "1.1" /
           orphan_attempt_dir(attempt);
  }
  // The coordinator's staging area, where a fetch receives contents before they get a name.
  fs::path staging() const { return dir.path() / "staging"; }
  void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    REQUIRE(write_file_atomic(file, text).ok());
  }
  TestDir dir;
  ClusterKey key;
  std::unique_ptr<testing::TestAgent> agent;
  AgentEndpoint endpoint;
};

constexpr auto kTimeout = std::chrono::seconds(10);

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A TCP listener that accepts connections, counts them, and never answers (a hung agent
// whose kernel still accepts).
class HungAgent {
 public:
  HungAgent() {
    auto made = listen_on(PeerAddress{"127.0.0.1", 0});
    REQUIRE(made.ok());
    listener_ = std::move(*made);
    port_ = local_port(listener_.get());
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{listener_.get(), POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        held_.emplace_back(fd);
        ++accepted_;
      }
    });
  }
  ~HungAgent() {
    stop_ = true;
    thread_.join();
  }
  PeerAddress address() const { return PeerAddress{"127.0.0.1", port_}; }
  int accepted() const { return accepted_; }

 private:
  UniqueFd listener_;
  uint16_t port_ = 0;
  std::vector<UniqueFd> held_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// Forwards connections to `target`; the first one is cut once `cut_after` bytes went from the
// target to the client (a link that drops mid-transfer), the later ones are whole.
class CuttingProxy {
 public:
  CuttingProxy(PeerAddress target, size_t cut_after)
      : target_(std::move(target)), cut_after_(cut_after) {
    auto made = listen_on(PeerAddress{"127.0.0.1", 0});
    REQUIRE(made.ok());
    listener_ = std::move(*made);
    port_ = local_port(listener_.get());
    thread_ = std::thread([this] { run(); });
  }
  ~CuttingProxy() {
    stop_ = true;
    thread_.join();
  }
  PeerAddress address() const { return PeerAddress{"127.0.0.1", port_}; }
  int connections() const { return connections_; }
  // The agent `direct` reaches, through this proxy, with a link window of 5 s.
  AgentEndpoint through(const AgentEndpoint& direct) const {
    return AgentEndpoint{address(), direct.tls, std::chrono::seconds(5),
                         std::make_shared<std::atomic<bool>>(false)};
  }
  // The bytes that went from the target to the client, over every connection.
  size_t carried() const { return carried_; }

 private:
  void run() {
    while (!stop_) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!client) continue;
      auto server = connect_to(target_, Clock::now() + std::chrono::seconds(5));
      if (!server.ok()) continue;
      const bool cut = connections_++ == 0;
      pump(client.get(), server->get(), cut ? cut_after_ : SIZE_MAX);
    }
  }
  // Both ways until either end closes, or `budget` bytes went to the client.
  void pump(int client, int server, size_t budget) {
    char buf[16384];
    size_t to_client = 0;
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
        if (n <= 0) return;
        size_t len = static_cast<size_t>(n);
        if (i == 1) {
          len = std::min(len, budget - to_client);
          to_client += len;
          carried_ += len;
        }
        for (size_t off = 0; off < len;) {
          pollfd w{p[1 - i].fd, POLLOUT, 0};
          ::poll(&w, 1, 1000);
          const ssize_t m = ::write(p[1 - i].fd, buf + off, len - off);
          if (m < 0 && errno != EAGAIN) return;
          if (m > 0) off += static_cast<size_t>(m);
        }
        if (to_client >= budget) return;  // the link drops
      }
    }
  }
  PeerAddress target_;
  size_t cut_after_;
  UniqueFd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<size_t> carried_{0};
  std::thread thread_;
};

TEST_CASE("remote orphans: listed, fetched with only what the store lacks, then dropped") {
  OrphanFixture f;
  const std::string weights(300000, 'w');
  f.write(f.orphans() / "7" / "cairn_orphan.json", R"({"step": 7})");
  f.write(f.orphans() / "7" / "w.bin", weights);
  f.write(f.orphans() / "7" / "sub" / "copy.bin", weights);
  f.write(f.orphans() / "7" / "rank0", "7");
  f.write(f.orphans() / "5" / "w.bin", "no marker: unfinished");
  f.write(f.orphans() / "08" / "cairn_orphan.json", "{}");  // not a step as the SDK names it
  f.write(f.orphans() / "x" / "cairn_orphan.json", "{}");
  f.write(f.dir.path() / "elsewhere" / "cairn_orphan.json", "{}");
  fs::create_directory_symlink(f.dir.path() / "elsewhere", f.orphans() / "9");

  auto listed = list_remote_orphans(f.endpoint, kOwner, "1.1", kTimeout);
  REQUIRE(listed.ok());
  CHECK_FALSE(listed->running);
  CHECK(listed->orphans == std::vector<OrphanStep>{{1, 7}});
  auto none = list_remote_orphans(f.endpoint, kOwner, "2.1", kTimeout);
  REQUIRE(none.ok());
  CHECK(none->orphans.empty());
  auto bad = list_remote_orphans(f.endpoint, kOwner, "..", kTimeout);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("refused") != std::string::npos);

  // The store has the weights already: only the small files travel.
  ObjectStore objects(f.dir.path() / "objects");
  REQUIRE(objects.put_bytes(weights).ok());
  const fs::path into = f.dir.path() / "local" / "remote-7";
  auto fetched = fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, 7}, into, objects, f.staging());
  REQUIRE(fetched.ok());
  CHECK(fetched->files == 4);
  CHECK(fetched->content_bytes == std::string(R"({"step": 7})").size() + 1);
  CHECK(read_file(into / "sub" / "copy.bin").value_or("") == weights);
  CHECK(read_file(into / "w.bin").value_or("") == weights);
  CHECK(read_file(into / "rank0").value_or("") == "7");
  // Again into the same directory (another agent's part of a gang): what is there is kept.
  auto merged = fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, 7}, into, objects, f.staging());
  REQUIRE(merged.ok());
  CHECK(merged->files == 0);
  CHECK(merged->kept == 4);
  CHECK(merged->content_bytes == 0);

  // Not an orphan directory, or one that leads out: refused with one line.
  for (int64_t step : {9, 8, 100}) {
    auto refused = fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, step}, f.dir.path() / "no",
                                       objects, f.staging());
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find('\n') == std::string::npos);
  }
  f.write(f.orphans() / "11" / "cairn_orphan.json", "{}");
  fs::create_symlink("/etc/passwd", f.orphans() / "11" / "passwd");
  auto linked = fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, 11}, f.dir.path() / "linked",
                                    objects, f.staging());
  REQUIRE_FALSE(linked.ok());
  CHECK_FALSE(fs::exists(f.dir.path() / "linked" / "passwd"));

  // A connection that ran the trial and still lasts (its ranks ended) holds its directory
  // for the agent's GC only: the ranks are not said to run.
  {
    auto gc_hold = AgentInUse::hold_trial("1.1");
    auto listed = list_remote_orphans(f.endpoint, kOwner, "1.1", kTimeout);
    REQUIRE(listed.ok());
    CHECK_FALSE(listed->running);
  }
  // While ranks of the trial run there, they are said to, and nothing is dropped.
  {
    auto hold = AgentInUse::hold_running_rank(orphan_trial_key(kOwner, "1.1"));
    auto running = list_remote_orphans(f.endpoint, kOwner, "1.1", kTimeout);
    REQUIRE(running.ok());
    CHECK(running->running);
    CHECK_FALSE(drop_remote_orphans(f.endpoint, kOwner, "1.1").ok());
    CHECK(fs::exists(f.orphans()));
  }
  REQUIRE(drop_remote_orphans(f.endpoint, kOwner, "1.1").ok());
  CHECK_FALSE(fs::exists(f.orphans()));
  CHECK(fs::exists(f.dir.path() / "elsewhere" / "cairn_orphan.json"));  // a link's target stays
  CHECK(drop_remote_orphans(f.endpoint, kOwner, "1.1").ok());           // nothing left: fine
}

TEST_CASE("remote orphans: another store's experiment of the same id is never seen") {
  // Two stores (two owners) whose experiments share the id 1 used one agent: each owner's
  // orphans of trial 1.1 are its own, and so are its running ranks.
  OrphanFixture f;
  const std::string other = "gpu1:/home/v/store#1";
  CHECK(orphan_owner_dir(other) != orphan_owner_dir(kOwner));
  CHECK(orphan_owner_dir(kOwner) == orphan_owner_dir(kOwner));  // stable
  f.write(f.orphans(other) / "9" / "cairn_orphan.json", R"({"step": 9})");
  f.write(f.orphans(other) / "9" / "w.bin", "theirs");
  auto listed = list_remote_orphans(f.endpoint, kOwner, "1.1", kTimeout);
  REQUIRE(listed.ok());
  CHECK(listed->orphans.empty());
  ObjectStore objects(f.dir.path() / "objects");
  CHECK_FALSE(fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, 9}, f.dir.path() / "x", objects,
                                  f.staging())
                  .ok());
  {
    // The other store's rank of its trial 1.1 still runs: this owner does not wait for it.
    auto hold = AgentInUse::hold_running_rank(orphan_trial_key(other, "1.1"));
    auto mine = list_remote_orphans(f.endpoint, kOwner, "1.1", kTimeout);
    REQUIRE(mine.ok());
    CHECK_FALSE(mine->running);
    auto theirs = list_remote_orphans(f.endpoint, other, "1.1", kTimeout);
    REQUIRE(theirs.ok());
    CHECK(theirs->running);
    CHECK(theirs->orphans == std::vector<OrphanStep>{{1, 9}});
  }
  REQUIRE(drop_remote_orphans(f.endpoint, kOwner, "1.1").ok());
  CHECK(fs::exists(f.orphans(other) / "9" / "w.bin"));
  // A request without an owner is refused.
  CHECK_FALSE(list_remote_orphans(f.endpoint, "", "1.1", kTimeout).ok());
}

TEST_CASE("remote orphans: each attempt's orphans are listed and fetched apart") {
  // The agent makes the attempt's directory (CAIRN_ATTEMPT): a listing says which attempt
  // left each orphan, so a resume adopts only its trial's latest attempt's.
  OrphanFixture f;
  f.write(f.orphans(kOwner, 1) / "9" / "cairn_orphan.json", R"({"step": 9})");
  f.write(f.orphans(kOwner, 1) / "9" / "w.bin", "attempt 1");
  f.write(f.orphans(kOwner, 2) / "5" / "cairn_orphan.json", R"({"step": 5})");
  f.write(f.orphans(kOwner, 2) / "5" / "w.bin", "attempt 2");
  // A step directory straight under the trial's (an older agent's layout), and a directory
  // that is no attempt's, are not listed.
  f.write(f.orphans().parent_path() / "4" / "cairn_orphan.json", R"({"step": 4})");
  f.write(f.orphans().parent_path() / "attempt-01" / "3" / "cairn_orphan.json", "{}");
  auto listed = list_remote_orphans(f.endpoint, kOwner, "1.1", kTimeout);
  REQUIRE(listed.ok());
  CHECK(listed->orphans == std::vector<OrphanStep>{{1, 9}, {2, 5}});
  ObjectStore objects(f.dir.path() / "objects");
  // Step 9 is attempt 1's only: asked for attempt 2's, refused.
  CHECK_FALSE(fetch_remote_orphan(f.endpoint, kOwner, "1.1", {2, 9}, f.dir.path() / "a", objects,
                                  f.staging())
                  .ok());
  const fs::path into = f.dir.path() / "b";
  REQUIRE(fetch_remote_orphan(f.endpoint, kOwner, "1.1", {2, 5}, into, objects, f.staging()).ok());
  CHECK(read_file(into / "w.bin").value_or("") == "attempt 2");
  REQUIRE(drop_remote_orphans(f.endpoint, kOwner, "1.1").ok());
  CHECK_FALSE(fs::exists(f.orphans().parent_path()));  // every attempt's
}

TEST_CASE("remote orphans: each agent is asked once about every trial, and the agents at once") {
  OrphanFixture f;
  f.write(f.orphans() / "7" / "cairn_orphan.json", R"({"step": 7})");
  HungAgent hung1, hung2;
  std::vector<OrphanQuestions> questions{
      {&f.endpoint, {"1.1", "2.1", ".."}, {}},
  };
  const AgentEndpoint e1{hung1.address(), f.endpoint.tls}, e2{hung2.address(), f.endpoint.tls};
  questions.push_back({&e1, {"1.1", "2.1", "3.1"}, {}});
  questions.push_back({&e2, {"1.1", "2.1", "3.1"}, {}});
  const auto started = Clock::now();
  ask_remote_orphans(questions, kOwner, std::chrono::milliseconds(1500));
  // A connection per agent: the hung ones cost the timeout once, together (per trial and
  // agent, one after the other, it would be 6 times that).
  CHECK(seconds_since(started) < 2.8);
  CHECK(hung1.accepted() == 1);
  CHECK(hung2.accepted() == 1);
  REQUIRE(questions[0].answers.size() == 3);
  REQUIRE(questions[0].answers[0].ok());
  CHECK(questions[0].answers[0]->orphans == std::vector<OrphanStep>{{1, 7}});
  REQUIRE(questions[0].answers[1].ok());
  CHECK(questions[0].answers[1]->orphans.empty());
  // A refusal of one trial (a name that names nothing) is that trial's answer only.
  REQUIRE_FALSE(questions[0].answers[2].ok());
  CHECK(questions[0].answers[2].status().message().find("refused") != std::string::npos);
  for (size_t a : {1, 2}) {
    REQUIRE(questions[a].answers.size() == 3);
    for (const auto& answer : questions[a].answers) CHECK_FALSE(answer.ok());
  }
}

TEST_CASE("remote orphans: a fetch that loses its link is tried again on a new connection") {
  OrphanFixture f;
  std::string weights(600000, 'w');
  for (size_t i = 0; i < weights.size(); i += 97) weights[i] = static_cast<char>('a' + i % 26);
  f.write(f.orphans() / "7" / "cairn_orphan.json", R"({"step": 7})");
  f.write(f.orphans() / "7" / "a.bin", std::string(200000, 'a'));
  f.write(f.orphans() / "7" / "w.bin", weights);
  ObjectStore objects(f.dir.path() / "objects");

  // Tried once, a link that drops mid-transfer fails the fetch.
  {
    CuttingProxy proxy(f.agent->address(), 300000);
    const AgentEndpoint through = proxy.through(f.endpoint);
    auto once = fetch_remote_orphan(through, kOwner, "1.1", {1, 7}, f.dir.path() / "once", objects,
                                    f.staging());
    CHECK_FALSE(once.ok());
  }
  CuttingProxy proxy(f.agent->address(), 300000);
  const AgentEndpoint through = proxy.through(f.endpoint);
  const fs::path into = f.dir.path() / "local" / "remote-7";
  auto fetched =
      fetch_remote_orphan_retrying(through, kOwner, "1.1", {1, 7}, into, objects, f.staging());
  REQUIRE(fetched.ok());
  CHECK(proxy.connections() == 2);
  CHECK(fetched->files == 3);
  CHECK(fetched->kept == 0);
  CHECK(read_file(into / "w.bin").value_or("") == weights);
  CHECK(read_file(into / "a.bin").value_or("") == std::string(200000, 'a'));
  CHECK(read_file(into / "cairn_orphan.json").value_or("") == R"({"step": 7})");
  // Only what the cut try had not received whole travelled again.
  CHECK(fetched->content_bytes >= weights.size() + 200000);
  CHECK(fetched->content_bytes < weights.size() + 2 * 200000 + 100);

  // A refusal is not tried again.
  const auto started = Clock::now();
  auto refused = fetch_remote_orphan_retrying(through, kOwner, "1.1", {1, 8}, f.dir.path() / "none",
                                              objects, f.staging());
  CHECK_FALSE(refused.ok());
  CHECK(seconds_since(started) < 2.0);
}

TEST_CASE(
    "remote orphans: a content cut in the middle of a fetch is asked for from the bytes kept") {
  // As a staged checkpoint's fetch (docs/peers.md "Resuming a content"): the try again asks
  // for the rest of the content it was receiving, not for all of it again.
  OrphanFixture f;
  std::string weights(3 * 1024 * 1024, 'w');  // three chunks
  for (size_t i = 0; i < weights.size(); i += 97) weights[i] = static_cast<char>('a' + i % 26);
  f.write(f.orphans() / "7" / "cairn_orphan.json", R"({"step": 7})");
  f.write(f.orphans() / "7" / "w.bin", weights);
  ObjectStore objects(f.dir.path() / "objects");
  // Cut once two of its chunks and some of the third went through.
  CuttingProxy proxy(f.agent->address(), 2 * 1024 * 1024 + 600000);
  const AgentEndpoint through = proxy.through(f.endpoint);
  const fs::path into = f.dir.path() / "local" / "remote-7";
  auto fetched =
      fetch_remote_orphan_retrying(through, kOwner, "1.1", {1, 7}, into, objects, f.staging());
  REQUIRE(fetched.ok());
  CHECK(proxy.connections() == 2);
  CHECK(fetched->files == 2);
  CHECK(read_file(into / "w.bin").value_or("") == weights);
  // Every content byte over both connections, once, but for the piece (256 KiB at most) the
  // cut left unwritten, frames and TLS: received from 0 again, the two chunks and more of the
  // first try would cross twice.
  CHECK(proxy.carried() < weights.size() + 512 * 1024);
  CHECK(fetched->content_bytes <= weights.size() + 16);
  // The start kept between the tries went with the fetch.
  CHECK(fs::is_empty(f.staging()));
}

TEST_CASE("remote orphan wait: a trial settles once its ranks exit; a hung agent fails alone") {
  OrphanFixture f;
  f.write(f.orphans() / "7" / "cairn_orphan.json", R"({"step": 7})");
  HungAgent hung;
  std::vector<RemoteOrphanWait::Entry> entries;
  entries.push_back({1, "1.1", "a", f.endpoint});
  entries.push_back({2, "2.1", "b", AgentEndpoint{hung.address(), f.endpoint.tls}});
  std::optional<AgentInUse::Token> running =
      AgentInUse::hold_running_rank(orphan_trial_key(kOwner, "1.1"));
  const auto started = Clock::now();
  RemoteOrphanWait wait(entries, kOwner, std::chrono::milliseconds(1000),
                        std::chrono::milliseconds(50), Clock::now() + std::chrono::seconds(30));
  // The hung agent's trial fails after the ask time, while 1.1's ranks still run.
  std::optional<std::vector<RemoteOrphanWait::Entry>> failed;
  while (!(failed = wait.settled(2)) && seconds_since(started) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(failed);
  REQUIRE(failed->size() == 1);
  CHECK((*failed)[0].state == RemoteOrphanWait::State::kFailed);
  CHECK(seconds_since(started) < 3.0);
  CHECK_FALSE(wait.settled(1));
  running.reset();  // the ranks exit
  const auto exited = Clock::now();
  std::optional<std::vector<RemoteOrphanWait::Entry>> done;
  while (!(done = wait.settled(1)) && seconds_since(exited) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(done);
  REQUIRE(done->size() == 1);
  CHECK((*done)[0].state == RemoteOrphanWait::State::kAnswered);
  CHECK((*done)[0].listing.orphans == std::vector<OrphanStep>{{1, 7}});
  // Settled within a few rounds of the exit (not held back by the hung agent's ask time).
  CHECK(seconds_since(exited) < 1.0);
}

}  // namespace
}  // namespace cairn
