// `random`: max_trials trials, each trained to max_length. With `sampler: random` trial k is
// sample_hparams(experiment seed, k); with `sampler: tpe` (or `name: tpe`) TPE proposes it
// from the results of the trials that completed before k was created (trial_sampler.h).
#pragma once

#include "engine/search/sweep_searcher.h"
#include "engine/search/trial_sampler.h"

namespace cairn {

class RandomSearcher : public SweepSearcher {
 public:
  RandomSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency);
  // Adds "sampler" (and "tpe") to the common fields.
  Json describe() const override;

 protected:
  Json hparams_of(int64_t index) override;
  void on_final_validation(int64_t trial, double loss) override;

 private:
  int64_t max_length_;
  TrialSampler sampler_;
};

}  // namespace cairn
