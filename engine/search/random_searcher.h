// `random`: max_trials trials sampled with sample_hparams (a pure function of the
// experiment seed and the trial index), each trained to max_length.
#pragma once

#include <map>
#include <string>

#include "engine/search/sweep_searcher.h"

namespace cairn {

class RandomSearcher : public SweepSearcher {
 public:
  RandomSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency);

 protected:
  Json hparams_of(int64_t index) const override;

 private:
  std::map<std::string, HyperparameterSpec> specs_;
};

}  // namespace cairn
