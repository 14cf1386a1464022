// Orphans on an agent (engine/coordinator/remote_orphans.h, docs/peers.md "Orphans on an
// agent"): listing, fetching only what the store lacks, and dropping, against an agent server
// in this process (loopback TCP, TLS 1.3 with a test key); what is not an orphan directory, or
// leads out, is never listed or sent.
#include <doctest/doctest.h>
#include <signal.h>

#include "common/file_util.h"
#include "common/sha256.h"
#include "engine/coordinator/agent_gc.h"
#include "engine/coordinator/orphan_messages.h"
#include "engine/coordinator/remote_orphans.h"
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
  auto fetched = fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, 7}, into, objects);
  REQUIRE(fetched.ok());
  CHECK(fetched->files == 4);
  CHECK(fetched->content_bytes == std::string(R"({"step": 7})").size() + 1);
  CHECK(read_file(into / "sub" / "copy.bin").value_or("") == weights);
  CHECK(read_file(into / "w.bin").value_or("") == weights);
  CHECK(read_file(into / "rank0").value_or("") == "7");
  // Again into the same directory (another agent's part of a gang): what is there is kept.
  auto merged = fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, 7}, into, objects);
  REQUIRE(merged.ok());
  CHECK(merged->files == 0);
  CHECK(merged->kept == 4);
  CHECK(merged->content_bytes == 0);

  // Not an orphan directory, or one that leads out: refused with one line.
  for (int64_t step : {9, 8, 100}) {
    auto refused =
        fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, step}, f.dir.path() / "no", objects);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find('\n') == std::string::npos);
  }
  f.write(f.orphans() / "11" / "cairn_orphan.json", "{}");
  fs::create_symlink("/etc/passwd", f.orphans() / "11" / "passwd");
  auto linked =
      fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, 11}, f.dir.path() / "linked", objects);
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
  CHECK_FALSE(
      fetch_remote_orphan(f.endpoint, kOwner, "1.1", {1, 9}, f.dir.path() / "x", objects).ok());
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
  CHECK_FALSE(
      fetch_remote_orphan(f.endpoint, kOwner, "1.1", {2, 9}, f.dir.path() / "a", objects).ok());
  const fs::path into = f.dir.path() / "b";
  REQUIRE(fetch_remote_orphan(f.endpoint, kOwner, "1.1", {2, 5}, into, objects).ok());
  CHECK(read_file(into / "w.bin").value_or("") == "attempt 2");
  REQUIRE(drop_remote_orphans(f.endpoint, kOwner, "1.1").ok());
  CHECK_FALSE(fs::exists(f.orphans().parent_path()));  // every attempt's
}

}  // namespace
}  // namespace cairn
