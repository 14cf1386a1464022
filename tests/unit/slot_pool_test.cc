#include "engine/slot_pool.h"

#include <doctest/doctest.h>

namespace cairn {

TEST_CASE("slots are handed out without oversubscription and come back on release") {
  SlotPool pool(4);
  CHECK(pool.free() == 4);
  auto a = pool.acquire(1, 2);
  REQUIRE(a);
  CHECK(*a == std::vector<int>{0, 1});
  auto b = pool.acquire(2, 1);
  REQUIRE(b);
  CHECK(*b == std::vector<int>{2});
  CHECK_FALSE(pool.acquire(3, 2));  // only one left
  CHECK(pool.free() == 1);
  pool.release(1);
  auto c = pool.acquire(3, 2);
  REQUIRE(c);
  CHECK(*c == std::vector<int>{0, 1});
  CHECK(device_list(*c) == "0,1");
  CHECK_FALSE(pool.acquire(4, 0));
}

}  // namespace cairn
