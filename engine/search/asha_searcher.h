// `asha` (SPEC §3): asynchronous successive halving with promotions (Li et al., "A System
// for Massively Parallel Hyperparameter Tuning", MLSys 2020), in brackets like
// Determined's adaptive ASHA (asha_plan). When a rung of n completed trials has a trial
// among its best ⌊n/η⌋ that was not promoted yet, that trial is promoted at once; the
// others wait, paused, and may be promoted later as the rung grows. Once a bracket has
// created all its trials and nothing below a rung is still training, that rung's waiting
// trials can never be promoted and are closed.
#pragma once

#include "engine/search/halving_searcher.h"

namespace cairn {

class AshaSearcher : public HalvingSearcher {
 public:
  AshaSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency);

 protected:
  void on_rung_changed(int bracket, int rung, Actions& out) override;
  // The bracket furthest behind its share of max_trials (created / planned), the first of
  // equals: brackets fill in proportion, the most aggressive first.
  int next_bracket() const override;

 private:
  void close_settled_rungs(int bracket, Actions& out);

  // Determined's stop_once: a trial is promoted or stopped when it reaches a rung, never
  // left waiting there for a later promotion.
  bool stop_once_ = false;
};

}  // namespace cairn
