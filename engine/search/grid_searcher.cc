#include "engine/search/grid_searcher.h"

#include <algorithm>

namespace cairn {
namespace {

int64_t grid_trials(const SearcherConfig& config, const Result<HyperparameterGrid>& grid) {
  if (!grid.ok()) return 0;
  if (config.max_trials > 0) return std::min<int64_t>(config.max_trials, grid->size());
  return grid->size();
}

}  // namespace

GridSearcher::GridSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency)
    : GridSearcher(config, seed, concurrency, HyperparameterGrid::build(config.hyperparameters)) {}

GridSearcher::GridSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency,
                           Result<HyperparameterGrid> grid)
    : SweepSearcher("grid", config.searcher, seed, concurrency, grid_trials(config.searcher, grid)),
      grid_(grid.ok() ? std::move(*grid) : HyperparameterGrid()) {}

}  // namespace cairn
