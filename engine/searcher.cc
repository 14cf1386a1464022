#include "engine/searcher.h"

#include "engine/asha_searcher.h"
#include "engine/bracket_plan.h"
#include "engine/grid_points.h"
#include "engine/grid_searcher.h"
#include "engine/hyperband_searcher.h"
#include "engine/random_searcher.h"
#include "engine/single_searcher.h"

namespace cairn {
namespace {

// What only the searcher can judge (the parser has checked everything else), as
// "FILE: KEY: what is wrong".
Status check_searcher_config(const ExperimentConfig& config) {
  Status st;
  if (config.searcher.name == "grid") {
    auto grid = HyperparameterGrid::build(config.hyperparameters);
    if (!grid.ok()) st = grid.status();
  } else if (config.searcher.name == "hyperband") {
    auto plan = hyperband_plan(config.searcher);
    if (!plan.ok()) st = plan.status();
  }
  if (st.ok()) return st;
  // A config read from a file names the line of `searcher:`, as the parser's errors do.
  const std::string& where =
      config.searcher_where.empty() ? config.config_path.string() : config.searcher_where;
  return Status::BadInput(where + ": " + st.message());
}

}  // namespace

Result<std::unique_ptr<Searcher>> make_searcher(const ExperimentConfig& config, uint64_t seed,
                                                int concurrency) {
  const std::string& name = config.searcher.name;
  if (Status st = check_searcher_config(config); !st.ok()) return st;
  std::unique_ptr<Searcher> searcher;
  if (name == "single") {
    searcher = std::make_unique<SingleSearcher>(config, seed);
  } else if (name == "grid") {
    searcher = std::make_unique<GridSearcher>(config, seed, concurrency);
  } else if (name == "random") {
    searcher = std::make_unique<RandomSearcher>(config, seed, concurrency);
  } else if (name == "hyperband") {
    searcher = std::make_unique<HyperbandSearcher>(config, seed, concurrency);
  } else if (name == "asha" || name == "adaptive_asha" || name == "async_halving") {
    searcher = std::make_unique<AshaSearcher>(config, seed, concurrency);
  } else {
    return Status::BadInput(config.config_path.string() + ": searcher.name: unknown searcher '" +
                            name + "'");
  }
  return searcher;
}

Result<std::unique_ptr<Searcher>> make_searcher(const ExperimentConfig& config, uint64_t seed) {
  return make_searcher(config, seed, 1);
}

}  // namespace cairn
