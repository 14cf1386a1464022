// `single`: one trial, trained to max_length.
#pragma once

#include "engine/search/searcher.h"

namespace cairn {

class SingleSearcher : public Searcher {
 public:
  SingleSearcher(const ExperimentConfig& config, uint64_t seed);
  std::vector<SearcherAction> start() override;
  std::vector<SearcherAction> on_validation(int64_t trial, int64_t length, double metric) override;
  std::vector<SearcherAction> on_trial_closed(int64_t trial) override;
  bool finished() const override { return closed_; }
  SearchPlan plan() const override { return {1, config_.searcher.max_length}; }

 private:
  const ExperimentConfig& config_;
  uint64_t seed_;
  bool close_sent_ = false;
  bool closed_ = false;
};

}  // namespace cairn
