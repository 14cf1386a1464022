// The searcher decides which trials exist and how long each trains (SPEC §3). It is a pure
// state machine: given the config, the seed and the events it is fed (validations, trials
// that closed), it answers with actions. The coordinator logs every action before acting on
// it, so `resume` can rebuild a searcher by feeding it the same events again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "engine/config/config.h"

namespace cairn {

struct SearcherAction {
  enum class Kind {
    kCreateTrial,  // a new trial: index, hparams, seed
    kTrain,        // train `trial` until `length` units are completed
    kClose,        // `trial` gets no more work: it completes (or is stopped early)
  };
  Kind kind;
  int64_t trial = 0;
  int64_t length = 0;
  Json hparams;
  uint64_t seed = 0;
  // kCreateTrial of a clone (pbt): the trial starts from `parent`'s checkpoint at
  // `parent_length` units (0: a trial of its own).
  int64_t parent = 0;
  int64_t parent_length = 0;

  static SearcherAction create(int64_t trial, Json hparams, uint64_t seed) {
    return {Kind::kCreateTrial, trial, 0, std::move(hparams), seed};
  }
  static SearcherAction clone(int64_t trial, Json hparams, uint64_t seed, int64_t parent,
                              int64_t parent_length) {
    return {Kind::kCreateTrial, trial, 0, std::move(hparams), seed, parent, parent_length};
  }
  static SearcherAction train(int64_t trial, int64_t length) {
    return {Kind::kTrain, trial, length, nullptr, 0};
  }
  static SearcherAction close(int64_t trial) { return {Kind::kClose, trial, 0, nullptr, 0}; }
};

// How much work the search plans, as far as its state knows now (Searcher::plan()).
struct SearchPlan {
  std::optional<int64_t> trials;  // trials it creates in all
  // Units it asks trials to train in all: each trial's length summed. A trial that errors
  // trains less than it was asked, so the units trained may end below this.
  std::optional<int64_t> units;
};

class Searcher {
 public:
  virtual ~Searcher() = default;
  virtual std::vector<SearcherAction> start() = 0;
  // `trial` completed `length` units with `metric`. A missing metric arrives as the worst
  // value (±inf); NaN is treated the same way.
  virtual std::vector<SearcherAction> on_validation(int64_t trial, int64_t length,
                                                    double metric) = 0;
  // `trial` ended for good (completed, errored out of restarts, canceled).
  virtual std::vector<SearcherAction> on_trial_closed(int64_t trial) = 0;
  // True when no trial will be created or trained any more.
  virtual bool finished() const = 0;
  // The searcher's own view for `cairn show` and `cairn watch` (docs/search.md has the
  // shape): brackets, rungs, promotions, best so far. Empty when there is nothing to add.
  virtual Json describe() const { return Json::object(); }
  // The plan for the live status line: read at every redraw, so cheap (no walk over the
  // trials). Empty when the searcher cannot say (pbt, a replay).
  virtual SearchPlan plan() const { return {}; }
  // From now on keep `concurrency` trials busy (values below 1 count as 1); answers with the
  // trials a larger value lets it create at once. The concurrency shapes which trials exist
  // when, so it is part of the call sequence: rebuild a searcher with the concurrency it was
  // made with, and log a change like any other call, to replay it at the same point.
  virtual std::vector<SearcherAction> set_concurrency(int concurrency) {
    (void)concurrency;
    return {};
  }
};

}  // namespace cairn
