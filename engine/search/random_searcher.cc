#include "engine/search/random_searcher.h"

namespace cairn {

RandomSearcher::RandomSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency)
    : SweepSearcher("random", config.searcher, seed, concurrency, config.searcher.max_trials),
      max_length_(config.searcher.max_length),
      sampler_(config, seed, TrialSampler::Rule::kFinal) {}

Json RandomSearcher::hparams_of(int64_t index) {
  return sampler_.sample(index);
}

void RandomSearcher::on_final_validation(int64_t trial, double loss) {
  sampler_.observe(trial, max_length_, loss);
}

Json RandomSearcher::describe() const {
  Json out = SweepSearcher::describe();
  sampler_.describe(out);
  return out;
}

}  // namespace cairn
