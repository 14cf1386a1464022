// What grid and random search have in common: a fixed number of trials, each trained to
// max_length and closed, created lazily so that at most `concurrency` are outstanding
// (created and not closed yet) — a grid of 10,000 points never has 10,000 records waiting.
#pragma once

#include <set>
#include <string>

#include "engine/search/rung.h"
#include "engine/search/searcher.h"

namespace cairn {

class SweepSearcher : public Searcher {
 public:
  std::vector<SearcherAction> start() override;
  std::vector<SearcherAction> on_validation(int64_t trial, int64_t length, double metric) override;
  std::vector<SearcherAction> on_trial_closed(int64_t trial) override;
  bool finished() const override { return closed_.size() == static_cast<size_t>(total_); }
  Json describe() const override;
  // Exact: every trial is trained to max_length.
  SearchPlan plan() const override { return {total_, total_ * config_.max_length}; }
  std::vector<SearcherAction> set_concurrency(int concurrency) override;

 protected:
  SweepSearcher(std::string name, const SearcherConfig& config, uint64_t seed, int concurrency,
                int64_t total);
  // The hyperparameters of trial `index` (1-based), asked once per trial, in index order,
  // when the trial is created.
  virtual Json hparams_of(int64_t index) = 0;
  // `trial` validated at max_length with `loss` (lower is better), just before it is closed.
  virtual void on_final_validation(int64_t trial, double loss) {
    (void)trial;
    (void)loss;
  }
  uint64_t seed() const { return seed_; }

 private:
  std::vector<SearcherAction> create_while_room();

  std::string name_;
  SearcherConfig config_;
  uint64_t seed_;
  int concurrency_;
  int64_t total_;
  int64_t created_ = 0;
  std::set<int64_t> close_sent_;
  std::set<int64_t> closed_;
  BestValidation best_;
};

}  // namespace cairn
