// `hyperband` (SPEC §3; Li et al., "Hyperband", JMLR 2018): one iteration of synchronous
// successive halving brackets laid out by hyperband_plan. A rung decides only when every
// trial of it has validated (or errored): the best of it go on to the next rung, resuming
// from their checkpoints, and the rest are closed. Trials are created lazily, bracket by
// bracket, the most aggressive bracket first.
#pragma once

#include "engine/search/halving_searcher.h"

namespace cairn {

class HyperbandSearcher : public HalvingSearcher {
 public:
  // REQUIRES: hyperband_plan(config.searcher) succeeds (make_searcher checks); otherwise
  // the search has no trials.
  HyperbandSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency);

 protected:
  void on_rung_changed(int bracket, int rung, Actions& out) override;
  int next_bracket() const override;

 private:
  std::vector<int> decided_;  // per bracket: rungs whose promotions are made
};

}  // namespace cairn
