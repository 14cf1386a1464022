#include "engine/coordinator/slot_pool.h"

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
  CHECK(device_list(*c, gpu_names(4, nullptr)) == "0,1");
  CHECK_FALSE(pool.acquire(4, 0));
}

TEST_CASE("GPU slots are named as cairn's own CUDA_VISIBLE_DEVICES names the devices") {
  // Unset or empty: the driver's indices.
  CHECK(gpu_names(2, nullptr) == std::vector<std::string>{"0", "1"});
  CHECK(gpu_names(2, "") == std::vector<std::string>{"0", "1"});
  CHECK(gpu_names(0, "3").empty());
  // cairn started with CUDA_VISIBLE_DEVICES=2,3: slot 0 is GPU 2, not GPU 0.
  const auto two_three = gpu_names(2, "2,3");
  CHECK(two_three == std::vector<std::string>{"2", "3"});
  CHECK(device_list({0}, two_three) == "2");
  CHECK(device_list({1}, two_three) == "3");
  CHECK(device_list({0, 1}, two_three) == "2,3");
  // UUIDs and MIG names pass through; spaces around entries are not part of a name.
  CHECK(gpu_names(2, "GPU-8a5c, MIG-1f2e") == std::vector<std::string>{"GPU-8a5c", "MIG-1f2e"});
  // No more names than the driver reports devices.
  CHECK(gpu_names(1, "5,6,7") == std::vector<std::string>{"5"});
  // More slots than GPUs (--slots 4 on 2 GPUs): slots share GPUs round robin, and a trial
  // holding two slots on one GPU names it once.
  CHECK(device_list({2}, two_three) == "2");
  CHECK(device_list({3}, two_three) == "3");
  CHECK(device_list({0, 2}, two_three) == "2");
  CHECK(device_list({1, 2}, two_three) == "3,2");
  CHECK(device_list({0}, {}) == "");
}

}  // namespace cairn
