#include "engine/coordinator/slot_pool.h"

#include <doctest/doctest.h>

namespace cairn {

// The slot indices of a placement on one machine.
std::vector<int> indices(const std::vector<SlotRef>& places) {
  std::vector<int> out;
  for (const SlotRef& p : places) out.push_back(p.slot);
  return out;
}

TEST_CASE("slots are handed out without oversubscription and come back on release") {
  SlotPool pool(4);
  CHECK(pool.free() == 4);
  auto a = pool.acquire(1, 2);
  REQUIRE(a);
  CHECK(indices(*a) == std::vector<int>{0, 1});
  auto b = pool.acquire(2, 1);
  REQUIRE(b);
  CHECK(indices(*b) == std::vector<int>{2});
  CHECK_FALSE(pool.acquire(3, 2));  // only one left
  CHECK(pool.free() == 1);
  pool.release(1);
  auto c = pool.acquire(3, 2);
  REQUIRE(c);
  CHECK(indices(*c) == std::vector<int>{0, 1});
  CHECK(device_list(indices(*c), gpu_names(4, nullptr)) == "0,1");
  CHECK_FALSE(pool.acquire(4, 0));
}

TEST_CASE("placement over machines: preferred first, then the freest, gangs split unevenly") {
  SlotPool pool(std::vector<int>{0, 3, 2});  // --slots 0, two agents
  CHECK(pool.size() == 5);
  CHECK(pool.free(0) == 0);
  // A gang of 4 lands on as few machines as possible: 3 on the freest, 1 on the next.
  auto gang = pool.acquire(1, 4);
  REQUIRE(gang);
  CHECK(*gang == std::vector<SlotRef>{{1, 0}, {1, 1}, {1, 2}, {2, 0}});
  CHECK(pool.free() == 1);
  CHECK_FALSE(pool.acquire(2, 2));  // never half a gang
  pool.release(1);
  // Single-slot trials spread: each goes to the machine with the most free slots.
  auto a = pool.acquire(2, 1);
  auto b = pool.acquire(3, 1);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->front().machine == 1);
  CHECK(b->front().machine == 1);  // 2 free there, 2 on machine 2: the lower index
  auto c = pool.acquire(4, 1);
  REQUIRE(c);
  CHECK(c->front().machine == 2);
  // The machine that holds a trial's checkpoint comes first, even when another is freer.
  pool.release(2);
  pool.release(3);
  pool.release(4);
  auto preferred = pool.acquire(5, 1, {2});
  REQUIRE(preferred);
  CHECK(preferred->front() == SlotRef{2, 0});
}

TEST_CASE("a lost machine offers nothing until it is back, perhaps with another count") {
  SlotPool pool(std::vector<int>{1, 2});
  auto held = pool.acquire(1, 2, {1});
  REQUIRE(held);
  pool.set_available(1, false);
  CHECK(pool.size() == 1);
  CHECK(pool.free() == 1);
  auto only_here = pool.acquire(2, 1, {1});
  REQUIRE(only_here);
  CHECK(only_here->front().machine == 0);
  CHECK_FALSE(pool.acquire(3, 1));
  pool.release(1);
  pool.set_slots(1, 4);
  pool.set_available(1, true);
  CHECK(pool.size() == 5);
  CHECK(pool.free() == 4);
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
