// `grid`: one trial per point of the hyperparameter grid (grid_points.h), in grid order,
// each trained to max_length; max_trials (when > 0) takes only the first max_trials points.
#pragma once

#include "engine/search/grid_points.h"
#include "engine/search/sweep_searcher.h"

namespace cairn {

class GridSearcher : public SweepSearcher {
 public:
  // REQUIRES: HyperparameterGrid::build(config.hyperparameters) succeeds (make_searcher
  // checks); otherwise the search has no trials.
  GridSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency);

 protected:
  Json hparams_of(int64_t index) override { return grid_.point(index - 1); }

 private:
  GridSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency,
               Result<HyperparameterGrid> grid);

  HyperparameterGrid grid_;
};

}  // namespace cairn
