// `cairn reproduce`: one trial that replays a recorded trial's life. It gets the recorded
// hyperparameters and seed, and is asked to train to the same lengths in the same order
// (the rung boundaries where the original validated and was paused or promoted), so the
// metric series it reports can be compared step by step with the original's.
#pragma once

#include <cstdint>
#include <vector>

#include "common/json.h"
#include "engine/search/searcher.h"

namespace cairn {

struct ReplayPlan {
  Json hparams;
  uint64_t seed = 0;
  std::vector<int64_t> lengths;  // ascending, never empty
};

// The plan stored under "reproduces" in an experiment record by `cairn reproduce`.
Result<ReplayPlan> replay_plan_from_json(const Json& reproduces);

// A re-run of a pbt clone starts where the clone did: from its parent's checkpoint, which
// `cairn reproduce` records under reproduces["parent"] ({"trial", "step", "checkpoint",
// "checkpoint_step"}: the parent's id, the step the clone was made at, the checkpoint it
// started from and that checkpoint's step). Writes into the replayed trial's record what the
// coordinator restores a clone from: "parent" (for show and watch, without an index: the
// parent is in another experiment) and "parent_checkpoint", with "parent_checkpoint_step",
// as the checkpoint's record is in the original experiment's database, not the re-run's.
// Does nothing for a plan without a parent.
void adopt_replayed_parent(const Json& reproduces, Json& trial_record);

class ReplaySearcher : public Searcher {
 public:
  explicit ReplaySearcher(ReplayPlan plan) : plan_(std::move(plan)) {}
  std::vector<SearcherAction> start() override;
  std::vector<SearcherAction> on_validation(int64_t trial, int64_t length, double metric) override;
  std::vector<SearcherAction> on_trial_closed(int64_t trial) override;
  bool finished() const override { return closed_; }

 private:
  ReplayPlan plan_;
  size_t next_ = 0;  // index in plan_.lengths of the next length to ask for
  bool close_sent_ = false;
  bool closed_ = false;
};

}  // namespace cairn
