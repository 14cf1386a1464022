#include "engine/search/sweep_searcher.h"

#include <algorithm>

#include "common/metric_order.h"
#include "engine/search/hparam_sampler.h"

namespace cairn {

SweepSearcher::SweepSearcher(std::string name, const SearcherConfig& config, uint64_t seed,
                             int concurrency, int64_t total)
    : name_(std::move(name)),
      config_(config),
      seed_(seed),
      concurrency_(std::max(concurrency, 1)),
      total_(total) {}

std::vector<SearcherAction> SweepSearcher::start() {
  return create_while_room();
}

std::vector<SearcherAction> SweepSearcher::create_while_room() {
  std::vector<SearcherAction> actions;
  while (created_ < total_ && created_ - static_cast<int64_t>(closed_.size()) < concurrency_) {
    const int64_t index = ++created_;
    actions.push_back(SearcherAction::create(index, hparams_of(index), trial_seed(seed_, index)));
    actions.push_back(SearcherAction::train(index, config_.max_length));
  }
  return actions;
}

std::vector<SearcherAction> SweepSearcher::on_validation(int64_t trial, int64_t length,
                                                         double metric) {
  if (trial < 1 || trial > created_ || closed_.count(trial) || close_sent_.count(trial)) return {};
  const double loss = MetricOrder(config_.smaller_is_better).key(metric);
  best_.offer(trial, length, metric, loss);
  if (length < config_.max_length) return {};
  on_final_validation(trial, loss);
  close_sent_.insert(trial);
  return {SearcherAction::close(trial)};
}

std::vector<SearcherAction> SweepSearcher::on_trial_closed(int64_t trial) {
  if (trial < 1 || trial > created_ || !closed_.insert(trial).second) return {};
  return create_while_room();
}

std::vector<SearcherAction> SweepSearcher::set_concurrency(int concurrency) {
  concurrency_ = std::max(concurrency, 1);
  return create_while_room();
}

Json SweepSearcher::describe() const {
  return Json{{"searcher", name_},
              {"trials_planned", total_},
              {"trials_created", created_},
              {"trials_closed", closed_.size()},
              {"best", best_.describe()}};
}

}  // namespace cairn
