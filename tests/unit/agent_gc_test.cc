// Garbage collection of the agent's directory (engine/coordinator/agent_gc.h): what was not
// used for the kept time goes, what a connected run uses stays, the budget removes the least
// recently used first, and a killed collection leaves nothing half-removed behind.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <utime.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/coordinator/agent_gc.h"
#include "engine/coordinator/orphan_messages.h"
#include "test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;
using SysClock = std::chrono::system_clock;

void put(const fs::path& p, size_t bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << std::string(bytes, 'x');
}

// Sets the mtime and atime of `p` to `days` ago.
void age(const fs::path& p, double days) {
  const auto t = SysClock::to_time_t(SysClock::now()) - static_cast<time_t>(days * 86400);
  struct utimbuf times {
    t, t
  };
  REQUIRE(::utime(p.c_str(), &times) == 0);
}

// A read-only checkout, as the agent makes them.
fs::path checkout(const fs::path& dir, char c) {
  const fs::path p = dir / "code" / std::string(40, c);
  put(p / "lib" / "train.py", 100);
  ::chmod((p / "lib" / "train.py").c_str(), 0444);
  ::chmod((p / "lib").c_str(), 0555);
  ::chmod(p.c_str(), 0555);
  return p;
}

AgentGcPolicy days(double keep) {
  AgentGcPolicy policy;
  policy.keep = std::chrono::seconds(static_cast<int64_t>(keep * 86400));
  return policy;
}

TEST_CASE("agent gc: entries unused for the kept days go, newer and in-use ones stay") {
  TestDir t;
  const fs::path dir = t.path();
  const fs::path old_code = checkout(dir, 'a'), new_code = checkout(dir, 'b');
  age(old_code, 20);
  age(new_code, 2);
  const fs::path old_data = dir / "data" / std::string(64, 'c');
  const fs::path new_data = dir / "data" / std::string(64, 'd');
  put(old_data, 10);
  put(new_data, 10);
  age(old_data, 20);
  const fs::path old_run = dir / "work" / "runs" / "00000000000000aa";
  const fs::path live_run = dir / "work" / "runs" / "00000000000000bb";
  put(old_run / "train.py", 5);
  put(live_run / "train.py", 5);
  age(old_run, 20);
  age(live_run, 20);
  const fs::path old_object = dir / "objects" / "ab" / std::string(62, 'e');
  put(old_object, 7);
  age(old_object, 20);
  // Staging: a checkout's half-made copy, a checkpoint staged for a trial whose rank died,
  // and one of a trial that is running.
  const fs::path stage = dir / "code" / ".stage-x1";
  put(stage / "f", 3);
  age(stage, 3);
  const fs::path dead = dir / "work" / "trials" / "1.1" / "checkpoints" / "attempt-1-ab";
  const fs::path live = dir / "work" / "trials" / "1.2" / "restore-2-cd";
  put(dead / "model", 3);
  put(live / "model", 3);
  age(dead, 3);
  age(live, 3);
  // A killed collection's trash.
  put(dir / ".trash" / "1-1-xyz" / "f", 3);

  auto run_hold = AgentInUse::hold_run("00000000000000bb");
  auto trial_hold = AgentInUse::hold_trial("1.2");
  auto stats = collect_agent_dir(dir, days(14));
  REQUIRE(stats.ok());
  CHECK_FALSE(fs::exists(old_code));
  CHECK(fs::exists(new_code / "lib" / "train.py"));
  CHECK_FALSE(fs::exists(old_data));
  CHECK(fs::exists(new_data));
  CHECK_FALSE(fs::exists(old_run));
  CHECK(fs::exists(live_run / "train.py"));  // a connected run's, however old
  CHECK_FALSE(fs::exists(old_object));
  CHECK_FALSE(fs::exists(stage));
  CHECK_FALSE(fs::exists(dead));
  CHECK_FALSE(fs::exists(dir / "work" / "trials" / "1.1"));  // left empty: removed
  CHECK(fs::exists(live / "model"));
  CHECK(fs::is_empty(dir / ".trash"));
  CHECK(stats->code == 1);
  CHECK(stats->data == 1);
  CHECK(stats->runs == 1);
  CHECK(stats->objects == 1);
  CHECK(stats->staging == 2);
  CHECK(stats->in_use == 2);
  CHECK(stats->line().rfind("removed 1 code checkout, 1 data file, 1 run directory, 1 checkpoint "
                            "object, 2 staging leftovers (",
                            0) == 0);

  // Released (the connection ended): now it goes too.
  run_hold.reset();
  trial_hold.reset();
  CHECK_FALSE(AgentInUse::run_in_use("00000000000000bb"));
  stats = collect_agent_dir(dir, days(14));
  REQUIRE(stats.ok());
  CHECK_FALSE(fs::exists(live_run));
  CHECK_FALSE(fs::exists(live));
  CHECK(fs::exists(new_code));
  // Nothing left to collect: says so.
  stats = collect_agent_dir(dir, days(14));
  REQUIRE(stats.ok());
  CHECK(stats->line().rfind("removed nothing (0 bytes); ", 0) == 0);
}

TEST_CASE("agent gc: over the budget, the least recently used go first; the grace is kept") {
  TestDir t;
  const fs::path dir = t.path();
  const fs::path a = dir / "data" / std::string(64, 'a');
  const fs::path b = dir / "data" / std::string(64, 'b');
  const fs::path c = dir / "data" / std::string(64, 'c');
  const fs::path fresh = dir / "data" / std::string(64, 'f');
  for (const fs::path& p : {a, b, c, fresh}) put(p, 1000);
  age(a, 3);
  age(b, 1);
  age(c, 2);
  // 4000 bytes, budget 2500: a (3 days) and c (2 days) go; b stays, and so does the file
  // used a moment ago whatever the budget.
  AgentGcPolicy policy = days(14);
  policy.max_bytes = 2500;
  auto stats = collect_agent_dir(dir, policy);
  REQUIRE(stats.ok());
  CHECK_FALSE(fs::exists(a));
  CHECK_FALSE(fs::exists(c));
  CHECK(fs::exists(b));
  CHECK(fs::exists(fresh));
  CHECK(stats->kept_bytes == 2000);
  CHECK(stats->freed_bytes == 2000);
  // Within the grace nothing goes, even far over the budget.
  policy.max_bytes = 1;
  age(b, 0.01);  // 15 minutes ago
  stats = collect_agent_dir(dir, policy);
  REQUIRE(stats.ok());
  CHECK(fs::exists(b));
  CHECK(fs::exists(fresh));
  // Used marks count from now.
  age(b, 30);
  mark_agent_entry_used(b);
  stats = collect_agent_dir(dir, days(14));
  REQUIRE(stats.ok());
  CHECK(fs::exists(b));
}

// Ages every entry of a tree, its root last.
void age_tree(const fs::path& root, double days) {
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it)
    age(it->path(), days);
  age(root, days);
}

TEST_CASE("agent gc: orphans go after the kept days unused, never while used or fetched") {
  TestDir t;
  const fs::path dir = t.path();
  const std::string owner = orphan_owner_dir("gpu1:/store#1");
  auto orphan = [&](const std::string& trial, double days) {
    const fs::path p = dir / "orphans" / owner / trial;
    put(p / "attempt-1" / "7" / "cairn_orphan.json", 10);
    put(p / "attempt-1" / "7" / "model", 100);
    age_tree(p, days);
    return p;
  };
  const fs::path old = orphan("1.1", 20), young = orphan("1.2", 2);
  const fs::path running = orphan("1.3", 20), fetched = orphan("1.4", 20);
  // Written into lately (a rank checkpointed as an orphan today, in a trial directory made
  // weeks ago): its newest write counts.
  const fs::path written = orphan("1.5", 20);
  put(written / "attempt-1" / "9" / "cairn_orphan.json", 10);
  age(written, 20);
  age(written / "attempt-1", 20);
  // Another store's orphans (its own owner directory), and an older agent's layout.
  const fs::path other = dir / "orphans" / orphan_owner_dir("gpu1:/other#1") / "1.1";
  put(other / "attempt-1" / "7" / "model", 5);
  age_tree(other, 20);
  const fs::path legacy = dir / "orphans" / "2.1";
  put(legacy / "7" / "model", 5);
  age_tree(legacy, 20);

  auto rank = AgentInUse::hold_running_rank(orphan_trial_key("gpu1:/store#1", "1.3"));
  auto fetch = AgentInUse::hold_orphans(orphan_trial_key("gpu1:/store#1", "1.4"));
  auto stats = collect_agent_dir(dir, days(14));
  REQUIRE(stats.ok());
  CHECK(stats->orphans == 3);  // 1.1, the other store's, the old layout's
  CHECK_FALSE(fs::exists(old));
  CHECK_FALSE(fs::exists(other));
  CHECK_FALSE(fs::exists(other.parent_path()));  // its owner directory, left empty
  CHECK_FALSE(fs::exists(legacy));
  CHECK(fs::exists(young / "attempt-1" / "7" / "model"));
  CHECK(fs::exists(running / "attempt-1" / "7" / "model"));
  CHECK(fs::exists(fetched / "attempt-1" / "7" / "model"));
  CHECK(fs::exists(written / "attempt-1" / "9" / "cairn_orphan.json"));
  CHECK(stats->line().find("orphaned trial") != std::string::npos);
  // Once the rank ended and the fetch is done, they go as well.
  rank.reset();
  fetch.reset();
  stats = collect_agent_dir(dir, days(14));
  REQUIRE(stats.ok());
  CHECK(stats->orphans == 2);
  CHECK_FALSE(fs::exists(running));
  CHECK_FALSE(fs::exists(fetched));
  CHECK(fs::exists(young));
  // Never by the budget: a tiny one takes none of them.
  AgentGcPolicy tiny = days(14);
  tiny.max_bytes = 1;
  stats = collect_agent_dir(dir, tiny);
  REQUIRE(stats.ok());
  CHECK(stats->orphans == 0);
  CHECK(fs::exists(young / "attempt-1" / "7" / "model"));
}

TEST_CASE("agent gc: an owner's empty directory stays while a rank of the owner runs") {
  // A rank's orphan directory is made in it only when the rank is asked for an orphan
  // (remote_paths.h make_orphan_dir), so it may be empty while ranks run.
  TestDir t;
  const fs::path dir = t.path();
  const fs::path owner = dir / "orphans" / orphan_owner_dir("gpu1:/store#1");
  const fs::path other = dir / "orphans" / orphan_owner_dir("gpu1:/store#2");
  fs::create_directories(owner);
  fs::create_directories(other);
  auto rank = AgentInUse::hold_running_rank(orphan_trial_key("gpu1:/store#1", "1.3"));
  CHECK(AgentInUse::owner_in_use(orphan_owner_dir("gpu1:/store#1")));
  CHECK_FALSE(AgentInUse::owner_in_use(orphan_owner_dir("gpu1:/store#2")));
  REQUIRE(collect_agent_dir(dir, days(14)).ok());
  CHECK(fs::exists(owner));
  CHECK_FALSE(fs::exists(other));
  rank.reset();
  REQUIRE(collect_agent_dir(dir, days(14)).ok());
  CHECK_FALSE(fs::exists(owner));
}

TEST_CASE("agent gc: sizes") {
  CHECK(*parse_size("none") == 0);
  CHECK(*parse_size("0") == 0);
  CHECK(*parse_size("4096") == 4096);
  CHECK(*parse_size("500M") == 500ull << 20);
  CHECK(*parse_size("20G") == 20ull << 30);
  CHECK(*parse_size("1T") == 1ull << 40);
  for (const char* bad : {"", "G", "-1G", "1.5G", "12X", "99999999999999G"})
    CHECK_FALSE(parse_size(bad).ok());
}

}  // namespace
}  // namespace cairn
