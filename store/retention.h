// Which checkpoints to keep (SPEC §5, `checkpoint.keep_*`): the union of each trial's
// latest, each trial's best, the experiment's best, and the checkpoints a trial that is not
// finished would resume from. Everything else may be deleted (store/garbage_collector.h).
//
// Order, so that ties are decided the same way every time:
//   latest  more steps first; equal steps: the one its trial registered last (the trial
//           record's `latest_checkpoint`) first, then smaller id first. Restore resumes
//           from the first usable one in this order (newer_checkpoint), so the checkpoint
//           keep_trial_latest keeps is the one the trial would resume from.
//   best    better metric first; equal metric: fewer steps first (the earlier checkpoint
//           reached it), then smaller id first.
// Only a finite number under the searcher's metric makes a checkpoint a candidate for best;
// a checkpoint without one is never "best" (it may still be a trial's latest).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "store/experiment_db.h"

namespace cairn {

struct RetentionPolicy {
  int keep_trial_latest = 1;  // 0: this rule keeps nothing
  int keep_trial_best = 1;
  int keep_experiment_best = 0;
  std::string metric;  // the searcher's metric
  bool smaller_is_better = true;

  // From the experiment record's "config" (the user's config as JSON): the checkpoint.keep_*
  // keys and searcher.metric / smaller_is_better, with SPEC §2's defaults where absent.
  static RetentionPolicy from_config(const Json& config);
};

struct CheckpointSummary {
  std::string id;
  int64_t trial = 0;  // the trial's index within its experiment
  int64_t steps_completed = 0;
  Json metrics = Json::object();  // validation metrics at that step, if any
  // Its trial's record names it `latest_checkpoint`: of the trial's checkpoints at this step,
  // it is the one registered last (a trial may save one step more than once).
  bool registered_last = false;

  // From a stored `ckpt/` record.
  static CheckpointSummary from_record(const Json& record);
};

// True when `a` comes before `b` in the "latest" order above (two checkpoints of one
// trial). Shared by retention, restore and TRIAL@latest, so all three name the same one.
bool newer_checkpoint(const CheckpointSummary& a, const CheckpointSummary& b);

// The checkpoints of `list` that have a finite value of `policy.metric`, in the "best" order
// above (by `policy.smaller_is_better`). Shared by retention and TRIAL@best.
std::vector<const CheckpointSummary*> by_best(const std::vector<const CheckpointSummary*>& list,
                                              const RetentionPolicy& policy);

struct RetentionDecision {
  std::set<std::string> keep;
  std::set<std::string> remove;  // every input id not in `keep`
};

// Pure: decides from its arguments alone. `pinned` ids are kept whatever the policy says
// (the checkpoints queued, running and paused trials resume from); pinned ids that are not
// among `checkpoints` are ignored.
RetentionDecision decide_retention(const RetentionPolicy& policy,
                                   const std::vector<CheckpointSummary>& checkpoints,
                                   const std::set<std::string>& pinned);

// The checkpoints of an experiment that retention would delete now, read from its database
// (the writer's, or a reader's). Live checkpoints (not deleted or being deleted) are judged
// by the policy in the experiment's config; pinned are, for each trial in QUEUED, RUNNING or
// PAUSED state, its newest usable checkpoints (all of those at its highest step, and its
// `latest_checkpoint`). Checkpoints marked corrupt are never restored, so they go too.
Result<std::vector<std::string>> checkpoints_to_delete(const ExperimentDb& db);

}  // namespace cairn
