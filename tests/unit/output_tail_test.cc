// OutputTail (engine/coordinator/output_tail.h): files followed from an offset, the keys
// whose files grew, and a file followed before it exists (a remote rank's, made at its first
// byte).
#include <doctest/doctest.h>
#include <poll.h>

#include <fstream>

#include "engine/coordinator/output_tail.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

using testing::TestDir;

void append(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::app);
  out << text;
}

// Whether the inotify descriptor is readable within `ms`.
bool woken(const OutputTail& tail, int ms) {
  pollfd p{tail.fd(), POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

TEST_CASE("output tail: a followed file's new bytes wake the loop and read once") {
  TestDir dir;
  auto tail = OutputTail::create();
  REQUIRE(tail.ok());
  const auto file = dir / "output.log";
  append(file, "before\n");
  REQUIRE(tail->follow(7, file, 7).ok());  // from the end of what was there
  CHECK(tail->read_new(7).empty());
  append(file, "line\n");
  REQUIRE(woken(*tail, 5000));
  CHECK(tail->changed() == std::vector<int64_t>{7});
  CHECK(tail->read_new(7) == "line\n");
  CHECK(tail->read_new(7).empty());
  CHECK(tail->offset(7) == 12);
}

TEST_CASE("output tail: a file followed before it exists is read once made") {
  TestDir dir;
  auto tail = OutputTail::create();
  REQUIRE(tail.ok());
  const auto file = dir / "trial" / "output.log";
  // Missing file and directory: followed, read as empty, nothing to attach yet.
  REQUIRE(tail->follow(1, file, 0).ok());
  CHECK(tail->read_new(1).empty());
  CHECK(tail->attach(file).empty());
  std::filesystem::create_directories(file.parent_path());
  append(file, "first\n");
  // Made before any watch: no event; attach names the key, and what it holds reads.
  CHECK_FALSE(woken(*tail, 0));
  CHECK(tail->attach(file) == std::vector<int64_t>{1});
  CHECK(tail->attach(file).empty());  // once
  CHECK(tail->read_new(1) == "first\n");
  // Watched from then on.
  append(file, "second\n");
  REQUIRE(woken(*tail, 5000));
  CHECK(tail->changed() == std::vector<int64_t>{1});
  CHECK(tail->read_new(1) == "second\n");
  tail->stop(1);
  CHECK(tail->read_new(1).empty());

  // Made and never attached (its rank ended in the same round): the next read finds it.
  const auto other = dir / "other.log";
  REQUIRE(tail->follow(2, other, 0).ok());
  append(other, "last words\n");
  CHECK(tail->read_new(2) == "last words\n");
  tail->stop(2);  // a key never opened stops as well
  REQUIRE(tail->follow(3, dir / "never.log", 0).ok());
  tail->stop(3);
}

TEST_CASE("output tail: a file that cannot be opened for another reason is an error") {
  TestDir dir;
  auto tail = OutputTail::create();
  REQUIRE(tail.ok());
  append(dir / "plain", "x");
  // A path through a regular file: ENOTDIR, not "not made yet".
  CHECK_FALSE(tail->follow(1, dir / "plain" / "output.log", 0).ok());
  CHECK(tail->read_new(1).empty());
}

}  // namespace
}  // namespace cairn
