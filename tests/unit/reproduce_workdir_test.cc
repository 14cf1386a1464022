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

// The record of a re-run of 1.1 whose checkout is `workdir`, fingerprinted as it is now.
Json record(const fs::path& workdir, const std::string& state) {
  Json j{{"state", state}, {"workdir", workdir.string()}, {"reproduces", {{"trial", "1.1"}}}};
  if (auto fp = checkout_fingerprint(workdir); fp.ok())
    j["reproduces"]["checkout_fingerprint"] = *fp;
  return j;
}

}  // namespace

TEST_CASE("an ended re-run's unchanged checkout is removed, and nothing else ever is") {
  testing::TestDir dir;
  StoreLayout store(dir / ".cairn");
  const fs::path checkout = make_checkout(store.reproduce() / "1.1-abc");

  SUBCASE("while the re-run may still run, its checkout stays") {
    for (const char* state : {"ACTIVE", "PAUSED"}) {
      auto removed = remove_ended_reproduce_workdir(store, record(checkout, state));
      REQUIRE(removed.ok());
      CHECK(removed->kept_because == "the re-run may still run");
      CHECK(fs::exists(checkout / "src" / "train.py"));
    }
  }
  SUBCASE("once it has ended, an unchanged checkout goes, with its size") {
    for (const char* state : {"COMPLETED", "ERROR", "CANCELED"}) {
      make_checkout(checkout);
      auto removed = remove_ended_reproduce_workdir(store, record(checkout, state));
      REQUIRE(removed.ok());
      CHECK(removed->kept_because.empty());
      CHECK(removed->path == fs::weakly_canonical(checkout).string());
      CHECK(removed->bytes == 5);
      CHECK_FALSE(fs::exists(checkout));
      CHECK(fs::exists(store.reproduce()));
    }
  }
  SUBCASE("what its trials wrote there, or a user changed, keeps it") {
    const Json recorded = record(checkout, "COMPLETED");
    SUBCASE("a file added") {
      std::ofstream(checkout / "src" / "output.csv") << "1,2\n";
    }
    SUBCASE("a file changed") {
      std::ofstream(checkout / "src" / "train.py") << "pass # x\n";
    }
    SUBCASE("a file removed") {
      fs::remove(checkout / "src" / "train.py");
    }
    SUBCASE("a file rewritten with its size and mtime put back") {
      const auto mtime = fs::last_write_time(checkout / "src" / "train.py");
      std::ofstream(checkout / "src" / "train.py") << "pas2\n";
      fs::last_write_time(checkout / "src" / "train.py", mtime);
    }
    auto removed = remove_ended_reproduce_workdir(store, recorded);
    REQUIRE(removed.ok());
    CHECK(removed->kept_because.find("changed since the checkout") != std::string::npos);
    CHECK(fs::exists(checkout / "src"));
  }
  SUBCASE("a re-run whose data was too large to keep keeps the links to it") {
    Json j = record(checkout, "COMPLETED");
    j["data"] = {{"stored", false}, {"files", Json::array({{{"path", "data/big.bin"}}})}};
    auto removed = remove_ended_reproduce_workdir(store, j);
    REQUIRE(removed.ok());
    CHECK_FALSE(removed->kept_because.empty());
    CHECK(fs::exists(checkout));
  }
  SUBCASE("a re-run recorded without a fingerprint keeps its checkout") {
    Json j = record(checkout, "COMPLETED");
    j["reproduces"].erase("checkout_fingerprint");
    auto removed = remove_ended_reproduce_workdir(store, j);
    REQUIRE(removed.ok());
    CHECK_FALSE(removed->kept_because.empty());
    CHECK(fs::exists(checkout));
  }
  SUBCASE("an experiment that is not a re-run keeps its workdir, ended or not") {
    Json j = record(checkout, "COMPLETED");
    j.erase("reproduces");
    auto removed = remove_ended_reproduce_workdir(store, j);
    REQUIRE(removed.ok());
    CHECK(removed->path.empty());
    CHECK(fs::exists(checkout));
  }
  SUBCASE("only a real directory inside .cairn/reproduce/, named for its trial") {
    const fs::path users = make_checkout(dir / "project");
    const fs::path sibling = make_checkout(store.reproduce() / "1.1-def");
    const fs::path nested = make_checkout(checkout / "deeper");
    const fs::path other_trial = make_checkout(store.reproduce() / "2.1-abc");
    fs::create_directory_symlink(users, store.reproduce() / "1.1-to-user");
    fs::create_directory_symlink(sibling, store.reproduce() / "1.1-to-sibling");
    for (const fs::path& workdir : {users, nested, other_trial,
                                    store.reproduce() / "1.1-abc" / ".." / ".." / ".." / "project",
                                    store.reproduce() / "1.1-to-user",
                                    store.reproduce() / "1.1-to-sibling", store.reproduce()}) {
      auto removed = remove_ended_reproduce_workdir(store, record(workdir, "COMPLETED"));
      REQUIRE(removed.ok());
      CHECK_MESSAGE(removed->path.empty(), workdir);
    }
    for (const fs::path& kept : {users, sibling, nested, other_trial})
      CHECK(fs::exists(kept / "src" / "train.py"));
  }
}

}  // namespace cairn
