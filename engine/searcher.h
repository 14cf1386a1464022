// The searcher decides which trials exist and how long each trains (SPEC §3). It is a pure
// state machine: given the config, the seed and the events it is fed (validations, trials
// that closed), it answers with actions. The coordinator logs every action before acting on
// it, so `resume` can rebuild a searcher by feeding it the same events again.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "engine/config.h"

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
};

class Searcher {
 public:
  virtual ~Searcher() = default;
  virtual std::vector<SearcherAction> start() = 0;
  // `trial` completed `length` units with `metric` (NaN when the metric was missing).
  virtual std::vector<SearcherAction> on_validation(int64_t trial, int64_t length,
                                                    double metric) = 0;
  // `trial` ended for good (completed, errored out of restarts, canceled).
  virtual std::vector<SearcherAction> on_trial_closed(int64_t trial) = 0;
  // True when no trial will be created or trained any more.
  virtual bool finished() const = 0;
};

// REQUIRES: `config` validated. Other searcher names give kBadInput (not built yet).
Result<std::unique_ptr<Searcher>> make_searcher(const ExperimentConfig& config, uint64_t seed);

}  // namespace cairn
