#include "cli/replay_extent.h"

#include <doctest/doctest.h>

namespace cairn::cli {

namespace {

// A recorded trial in `state`, asked to train to `lengths`, that reported training at steps
// 1..`trained` and validated at `validated`.
TrialRef trial(const std::string& state, std::vector<int64_t> lengths, int64_t trained,
               std::vector<int64_t> validated) {
  TrialRef ref;
  ref.trial = Json{{"state", state}};
  ref.train_lengths = std::move(lengths);
  for (int64_t step = 1; step <= trained; ++step) ref.training.push_back({step, Json::object()});
  for (int64_t step : validated) ref.validation.push_back({step, Json::object()});
  return ref;
}

}  // namespace

TEST_CASE("a completed trial is replayed to every length it was asked for") {
  const ReplayExtent e = replay_extent(trial("COMPLETED", {1, 3, 9}, 9, {1, 3, 9}));
  CHECK(e.lengths == std::vector<int64_t>{1, 3, 9});
  CHECK(e.end == 9);
  CHECK_FALSE(e.cut);
  // A trial of a searcher that stopped it at a rung it reached: nothing to cut.
  CHECK_FALSE(replay_extent(trial("STOPPED", {1, 3}, 3, {1, 3})).cut);
}

TEST_CASE("a trial that ended early is replayed to its last validation") {
  // Canceled on its way from rung 3 to 9, at step 7: the re-run stops at 3, where both ran.
  const ReplayExtent e = replay_extent(trial("CANCELED", {1, 3, 9}, 7, {1, 3}));
  CHECK(e.lengths == std::vector<int64_t>{1, 3});
  CHECK(e.end == 3);
  CHECK(e.cut);
  // A validation between lengths (the trial's own, mid-way) ends the replay there.
  const ReplayExtent mid = replay_extent(trial("ERROR", {2, 8}, 6, {2, 5}));
  CHECK(mid.lengths == std::vector<int64_t>{2, 5});
  CHECK(mid.end == 5);
}

TEST_CASE("a trial that never validated is replayed to its last training step") {
  const ReplayExtent e = replay_extent(trial("ERROR", {60}, 4, {}));
  CHECK(e.lengths == std::vector<int64_t>{4});
  CHECK(e.cut);
  // One that reported nothing at all: replayed as asked.
  const ReplayExtent none = replay_extent(trial("CANCELED", {60}, 0, {}));
  CHECK(none.lengths == std::vector<int64_t>{60});
  CHECK_FALSE(none.cut);
}

TEST_CASE("up_to keeps the points at or before the step") {
  const TrialRef ref = trial("COMPLETED", {5}, 5, {});
  CHECK(up_to(ref.training, 3).size() == 3);
  CHECK(up_to(ref.training, 0).empty());
}

}  // namespace cairn::cli
