// Orphans on an agent (engine/coordinator/remote_orphans.h, docs/peers.md "Orphans on an
// agent"): listing, fetching only what the store lacks, and dropping, against an agent server
// in this process (loopback TCP, TLS 1.3 with a test key); what is not an orphan directory, or
// leads out, is never listed or sent.
#include <doctest/doctest.h>
#include <signal.h>

#include "common/file_util.h"
#include "common/sha256.h"
#include "engine/coordinator/agent_gc.h"
#include "engine/coordinator/remote_orphans.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;

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
  fs::path orphans() const { return dir.path() / "agent" / "orphans" / "1.1"; }
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

  auto listed = list_remote_orphans(f.endpoint, "1.1", kTimeout);
  REQUIRE(listed.ok());
  CHECK_FALSE(listed->running);
  CHECK(listed->steps == std::vector<int64_t>{7});
  auto none = list_remote_orphans(f.endpoint, "2.1", kTimeout);
  REQUIRE(none.ok());
  CHECK(none->steps.empty());
  auto bad = list_remote_orphans(f.endpoint, "..", kTimeout);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("refused") != std::string::npos);

  // The store has the weights already: only the small files travel.
  ObjectStore objects(f.dir.path() / "objects");
  REQUIRE(objects.put_bytes(weights).ok());
  const fs::path into = f.dir.path() / "local" / "remote-7";
  auto fetched = fetch_remote_orphan(f.endpoint, "1.1", 7, into, objects);
  REQUIRE(fetched.ok());
  CHECK(fetched->files == 4);
  CHECK(fetched->content_bytes == std::string(R"({"step": 7})").size() + 1);
  CHECK(read_file(into / "sub" / "copy.bin").value_or("") == weights);
  CHECK(read_file(into / "w.bin").value_or("") == weights);
  CHECK(read_file(into / "rank0").value_or("") == "7");
  // Again into the same directory (another agent's part of a gang): what is there is kept.
  auto merged = fetch_remote_orphan(f.endpoint, "1.1", 7, into, objects);
  REQUIRE(merged.ok());
  CHECK(merged->files == 0);
  CHECK(merged->kept == 4);
  CHECK(merged->content_bytes == 0);

  // Not an orphan directory, or one that leads out: refused with one line.
  for (int64_t step : {9, 8, 100}) {
    auto refused = fetch_remote_orphan(f.endpoint, "1.1", step, f.dir.path() / "no", objects);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find('\n') == std::string::npos);
  }
  f.write(f.orphans() / "11" / "cairn_orphan.json", "{}");
  fs::create_symlink("/etc/passwd", f.orphans() / "11" / "passwd");
  auto linked = fetch_remote_orphan(f.endpoint, "1.1", 11, f.dir.path() / "linked", objects);
  REQUIRE_FALSE(linked.ok());
  CHECK_FALSE(fs::exists(f.dir.path() / "linked" / "passwd"));

  // While ranks of the trial run there, they are said to, and nothing is dropped.
  {
    auto hold = AgentInUse::hold_trial("1.1");
    auto running = list_remote_orphans(f.endpoint, "1.1", kTimeout);
    REQUIRE(running.ok());
    CHECK(running->running);
    CHECK_FALSE(drop_remote_orphans(f.endpoint, "1.1").ok());
    CHECK(fs::exists(f.orphans()));
  }
  REQUIRE(drop_remote_orphans(f.endpoint, "1.1").ok());
  CHECK_FALSE(fs::exists(f.orphans()));
  CHECK(fs::exists(f.dir.path() / "elsewhere" / "cairn_orphan.json"));  // a link's target stays
  CHECK(drop_remote_orphans(f.endpoint, "1.1").ok());                   // nothing left: fine
}

}  // namespace
}  // namespace cairn
