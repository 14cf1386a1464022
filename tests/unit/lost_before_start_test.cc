// Which placed machines were lost before a trial's launch (engine/coordinator/
// lost_before_start.h): each lost machine once, in rank order; none when every one is up.
#include <doctest/doctest.h>

#include <set>

#include "engine/coordinator/lost_before_start.h"

namespace cairn {
namespace {

TEST_CASE("lost before start: the placed machines that are lost, each once, in rank order") {
  const std::vector<SlotRef> places = {{0, 0}, {2, 0}, {2, 1}, {1, 0}, {3, 0}};
  std::set<int> down;
  std::vector<int> asked;
  auto lost = [&](int m) {
    asked.push_back(m);
    return down.count(m) > 0;
  };
  CHECK(lost_machines(places, lost).empty());
  down = {1, 2};
  CHECK(lost_machines(places, lost) == std::vector<int>{2, 1});
  down = {3, 5};  // 5 holds none of the ranks
  CHECK(lost_machines(places, lost) == std::vector<int>{3});
  CHECK(lost_machines({}, lost).empty());
  // A machine found lost is not asked about again for its other ranks.
  asked.clear();
  down = {2};
  (void)lost_machines(places, lost);
  CHECK(asked == std::vector<int>{0, 2, 1, 3});
}

}  // namespace
}  // namespace cairn
