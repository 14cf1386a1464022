#include "engine/search/random_searcher.h"

#include "engine/search/hparam_sampler.h"

namespace cairn {

RandomSearcher::RandomSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency)
    : SweepSearcher("random", config.searcher, seed, concurrency, config.searcher.max_trials),
      specs_(config.hyperparameters) {}

Json RandomSearcher::hparams_of(int64_t index) const {
  return sample_hparams(specs_, seed(), index);
}

}  // namespace cairn
