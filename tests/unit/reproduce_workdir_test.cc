#include "store/reproduce_workdir.h"

#include <doctest/doctest.h>

#include <fstream>

#include "test_dir.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

// A checkout with one 5-byte file, like the ones `cairn reproduce` makes.
fs::path make_checkout(const fs::path& dir) {
  fs::create_directories(dir / "src");
  std::ofstream(dir / "src" / "train.py") << "pass\n";
  return dir;
}

Json record(const fs::path& workdir, const std::string& state, bool reproduces = true) {
  Json j{{"state", state}, {"workdir", workdir.string()}};
  if (reproduces) j["reproduces"] = {{"trial", "1.1"}};
  return j;
}

}  // namespace

TEST_CASE("an ended re-run's reproduce workdir is removed, and nothing else ever is") {
  testing::TestDir dir;
  StoreLayout store(dir / ".cairn");
  const fs::path checkout = make_checkout(store.reproduce() / "1.1-abc");

  SUBCASE("while the re-run may still run, its workdir stays") {
    for (const char* state : {"ACTIVE", "PAUSED"}) {
      auto removed = remove_ended_reproduce_workdir(store, record(checkout, state));
      REQUIRE(removed.ok());
      CHECK(removed->path.empty());
      CHECK(fs::exists(checkout / "src" / "train.py"));
    }
  }
  SUBCASE("once it has ended, it goes, with its size") {
    for (const char* state : {"COMPLETED", "ERROR", "CANCELED"}) {
      make_checkout(checkout);
      auto removed = remove_ended_reproduce_workdir(store, record(checkout, state));
      REQUIRE(removed.ok());
      CHECK(removed->path == fs::weakly_canonical(checkout).string());
      CHECK(removed->bytes == 5);
      CHECK_FALSE(fs::exists(checkout));
      CHECK(fs::exists(store.reproduce()));
    }
    auto again = remove_ended_reproduce_workdir(store, record(checkout, "COMPLETED"));
    REQUIRE(again.ok());
    CHECK(again->path.empty());  // gone already: nothing to report
  }
  SUBCASE("a re-run whose data was too large to keep keeps the links to it") {
    Json j = record(checkout, "COMPLETED");
    j["data"] = {{"stored", false}, {"files", Json::array({{{"path", "data/big.bin"}}})}};
    auto removed = remove_ended_reproduce_workdir(store, j);
    REQUIRE(removed.ok());
    CHECK(removed->path.empty());
    CHECK(fs::exists(checkout));
    j["data"]["stored"] = true;
    removed = remove_ended_reproduce_workdir(store, j);
    REQUIRE(removed.ok());
    CHECK_FALSE(removed->path.empty());
  }
  SUBCASE("an experiment that is not a re-run keeps its workdir, ended or not") {
    auto removed = remove_ended_reproduce_workdir(store, record(checkout, "COMPLETED", false));
    REQUIRE(removed.ok());
    CHECK(removed->path.empty());
    CHECK(fs::exists(checkout));
  }
  SUBCASE("a workdir outside .cairn/reproduce/ is the user's") {
    const fs::path users = make_checkout(dir / "project");
    const fs::path nested = make_checkout(store.reproduce() / "1.1-abc" / "deeper");
    const fs::path escape = store.reproduce() / "1.1-abc" / ".." / ".." / ".." / "project";
    fs::create_directory_symlink(users, store.reproduce() / "link");
    for (const fs::path& workdir :
         {users, nested, escape, store.reproduce() / "link", store.reproduce()}) {
      auto removed = remove_ended_reproduce_workdir(store, record(workdir, "COMPLETED"));
      REQUIRE(removed.ok());
      CHECK_MESSAGE(removed->path.empty(), workdir);
    }
    CHECK(fs::exists(users / "src" / "train.py"));
    CHECK(fs::exists(nested / "src" / "train.py"));
  }
}

}  // namespace cairn
