#include "store/trial_numbers.h"

#include <doctest/doctest.h>

#include <set>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "test_dir.h"

namespace cairn {

TEST_CASE("trial numbers count up store-wide, never repeated, also between threads") {
  testing::TestDir dir;
  const StoreLayout store(dir.path());
  CHECK(*allocate_trial_number(store) == 1);
  CHECK(*allocate_trial_number(store) == 2);
  // Each call opens and locks the file anew, as two cairn processes would.
  std::vector<int64_t> got(40);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < 10; ++i) got[t * 10 + i] = *allocate_trial_number(store);
    });
  for (auto& th : threads) th.join();
  const std::set<int64_t> unique(got.begin(), got.end());
  CHECK(unique.size() == 40);
  CHECK(*unique.begin() == 3);
  CHECK(*unique.rbegin() == 42);
  CHECK(*read_file(dir / "trial_numbers") == "42\n");
}

TEST_CASE("a damaged trial_numbers file is an error, not a repeated number") {
  testing::TestDir dir;
  REQUIRE(write_file_atomic(dir / "trial_numbers", "not a number\n").ok());
  auto number = allocate_trial_number(StoreLayout(dir.path()));
  CHECK_FALSE(number.ok());
  CHECK(number.status().kind() == ErrorKind::kCorrupt);
}

}  // namespace cairn
