#include "engine/search/single_searcher.h"

#include "engine/search/hparam_sampler.h"

namespace cairn {

SingleSearcher::SingleSearcher(const ExperimentConfig& config, uint64_t seed)
    : config_(config), seed_(seed) {}

std::vector<SearcherAction> SingleSearcher::start() {
  SearcherAction create{SearcherAction::Kind::kCreateTrial, 1};
  create.hparams = sample_hparams(config_.hyperparameters, seed_, 1);
  create.seed = trial_seed(seed_, 1);
  SearcherAction train{SearcherAction::Kind::kTrain, 1, config_.searcher.max_length};
  return {create, train};
}

std::vector<SearcherAction> SingleSearcher::on_validation(int64_t trial, int64_t length, double) {
  if (close_sent_ || length < config_.searcher.max_length) return {};
  close_sent_ = true;
  return {SearcherAction{SearcherAction::Kind::kClose, trial}};
}

std::vector<SearcherAction> SingleSearcher::on_trial_closed(int64_t) {
  closed_ = true;
  return {};
}

}  // namespace cairn
