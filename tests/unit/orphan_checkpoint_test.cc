#include "engine/coordinator/orphan_checkpoint.h"

#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "test_dir.h"

namespace {

using cairn::orphan_step;

void mark(const std::filesystem::path& dir, int rank, const std::string& marker) {
  std::ofstream(dir / (rank == 0 ? std::string("cairn_orphan.json")
                                 : "cairn_orphan.rank" + std::to_string(rank) + ".json"))
      << marker;
}

std::string marker(int64_t step, int world) {
  return R"({"step":)" + std::to_string(step) + R"(,"world_size":)" + std::to_string(world) + "}";
}

}  // namespace

TEST_CASE("an orphan checkpoint is finished when every rank marked the same step") {
  cairn::testing::TestDir dir;
  SUBCASE("one rank") {
    mark(dir.path(), 0, marker(12, 1));
    auto step = orphan_step(dir.path(), 1);
    REQUIRE(step.ok());
    CHECK(*step == 12);
  }
  SUBCASE("three ranks, all marked") {
    for (int r = 0; r < 3; ++r) mark(dir.path(), r, marker(212, 3));
    auto step = orphan_step(dir.path(), 3);
    REQUIRE(step.ok());
    CHECK(*step == 212);
  }
  SUBCASE("no marker of rank 0: partial") {
    mark(dir.path(), 1, marker(4, 2));
    auto step = orphan_step(dir.path(), 2);
    REQUIRE_FALSE(step.ok());
    CHECK(step.status().message() == "rank 0 did not finish writing it");
  }
  SUBCASE("a rank that did not enter it marks its part, and it is complete") {
    mark(dir.path(), 0, marker(8, 2));
    mark(dir.path(), 1, R"({"step":8,"world_size":2,"entered":false})");
    auto step = orphan_step(dir.path(), 2);
    REQUIRE(step.ok());
    CHECK(*step == 8);
  }
  SUBCASE("no rank entered it: no checkpoint") {
    mark(dir.path(), 0, R"({"step":8,"world_size":2,"entered":false})");
    mark(dir.path(), 1, R"({"step":8,"world_size":2,"entered":false})");
    auto step = orphan_step(dir.path(), 2);
    REQUIRE_FALSE(step.ok());
    CHECK(step.status().message() == "no rank wrote a checkpoint into it");
  }
  SUBCASE("ranks missing or at another step are named") {
    mark(dir.path(), 0, marker(8, 4));
    mark(dir.path(), 1, marker(8, 4));
    mark(dir.path(), 2, marker(10, 4));
    auto step = orphan_step(dir.path(), 4);
    REQUIRE_FALSE(step.ok());
    CHECK(step.status().message() == "ranks 2, 3 of 4 did not finish writing it");
  }
  SUBCASE("damaged markers are unfinished, not errors thrown") {
    mark(dir.path(), 0, marker(8, 2));
    mark(dir.path(), 1, R"({"step":"8"})");
    CHECK(orphan_step(dir.path(), 2).status().message() == "rank 1 of 2 did not finish writing it");
    mark(dir.path(), 0, R"({"step":8,"world_size":"two"})");
    CHECK_FALSE(orphan_step(dir.path(), 2).ok());
    mark(dir.path(), 0, "{\"step\":");
    CHECK_FALSE(orphan_step(dir.path(), 2).ok());
  }
  SUBCASE("written by a gang of another size") {
    mark(dir.path(), 0, marker(8, 1));
    auto step = orphan_step(dir.path(), 2);
    REQUIRE_FALSE(step.ok());
    CHECK(step.status().message() == "written by 1 ranks, but the trial has 2");
  }
}
