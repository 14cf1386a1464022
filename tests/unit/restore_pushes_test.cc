// One push per agent per restore (engine/coordinator/restore_pushes.h): ranks of one restore
// that ask at once, or after it is done, share the first one's push and its result (a
// failure too); another attempt or another checkpoint pushes again; the checkpoint is
// scanned once per restore for every agent.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "engine/coordinator/restore_pushes.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

TEST_CASE("restore pushes: the ranks of one restore share one push, which they wait for") {
  RestorePushes pushes;
  std::mutex mutex;
  std::condition_variable cv;
  bool go = false;
  std::atomic<int> ran{0}, entered{0};
  auto push = [&]() -> Result<PushedCheckpoint> {
    ++ran;
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return go; });
    PushedCheckpoint p;
    p.path = "/agent/work/trials/1.1/restore-2-x";
    p.files = 3;
    return p;
  };
  std::vector<Result<PushedCheckpoint>> results(3, Status::Failed("not run"));
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      ++entered;
      results[static_cast<size_t>(r)] = pushes.get("1.1", 2, "/store/restore", push);
    });
  // The push is held until every rank has asked: none of them may push a second time.
  while (entered.load() < 3 || ran.load() < 1) std::this_thread::yield();
  {
    std::lock_guard lock(mutex);
    go = true;
  }
  cv.notify_all();
  for (auto& t : ranks) t.join();
  CHECK(ran.load() == 1);
  CHECK(pushes.runs() == 1);
  for (const auto& r : results) {
    REQUIRE(r.ok());
    CHECK(r->path == "/agent/work/trials/1.1/restore-2-x");
  }
  // Asked after it is done: the same result, no push.
  auto late = pushes.get("1.1", 2, "/store/restore", push);
  REQUIRE(late.ok());
  CHECK(late->path == "/agent/work/trials/1.1/restore-2-x");
  CHECK(ran.load() == 1);
  // Another attempt, another trial: pushed again.
  CHECK(pushes.get("1.1", 3, "/store/restore", push).ok());
  CHECK(pushes.get("1.2", 3, "/store/restore", push).ok());
  CHECK(ran.load() == 3);
  CHECK(pushes.runs() == 3);
}

TEST_CASE("restore pushes: a failed push is every waiting rank's failure") {
  RestorePushes pushes;
  int ran = 0;
  auto failing = [&]() -> Result<PushedCheckpoint> {
    ++ran;
    return Status::Failed("127.0.0.1:7070: connection refused");
  };
  auto first = pushes.get("1.1", 2, "/store/restore", failing);
  auto second = pushes.get("1.1", 2, "/store/restore", failing);
  CHECK(!first.ok());
  REQUIRE(!second.ok());
  CHECK(second.status().message() == "127.0.0.1:7070: connection refused");
  CHECK(ran == 1);
}

TEST_CASE("restore pushes: a restore's checkpoint is hashed once for every agent") {
  testing::TestDir dir;
  REQUIRE(write_file_atomic(dir / "w", "weights").ok());
  auto first = scan_for_restore("9.1", 2, dir.path());
  REQUIRE(first.ok());
  CHECK(first->files.size() == 1);
  // Another agent's restore of the same attempt reuses the scan (the file added since is
  // not seen: nothing was hashed again); the next attempt scans afresh.
  REQUIRE(write_file_atomic(dir / "x", "more").ok());
  auto second = scan_for_restore("9.1", 2, dir.path());
  REQUIRE(second.ok());
  CHECK(second->files.size() == 1);
  CHECK(second->files[0].sha256 == first->files[0].sha256);
  auto next = scan_for_restore("9.1", 3, dir.path());
  REQUIRE(next.ok());
  CHECK(next->files.size() == 2);
}

}  // namespace
}  // namespace cairn
