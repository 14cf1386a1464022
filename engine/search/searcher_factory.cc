#include "engine/search/searcher_factory.h"

#include "engine/search/asha_searcher.h"
#include "engine/search/bracket_plan.h"
#include "engine/search/grid_points.h"
#include "engine/search/grid_searcher.h"
#include "engine/search/hyperband_searcher.h"
#include "engine/search/pbt_searcher.h"
#include "engine/search/random_searcher.h"
#include "engine/search/single_searcher.h"

namespace cairn {
namespace {

// What only the searcher can judge (the parser has checked everything else), as
// "WHERE: KEY: what is wrong".
Status check_searcher_config(const ExperimentConfig& config) {
  const std::string file = config.config_path.string();
  if (config.searcher.name == "grid") {
    // The parser checks the grid at each hyperparameter's line; this is a backstop.
    auto grid = HyperparameterGrid::build(config.hyperparameters);
    if (!grid.ok()) return Status::BadInput(file + ": " + grid.status().message());
  } else if (config.searcher.name == "hyperband") {
    // The shape of the whole search: named at `searcher:`, with its line when it has one.
    auto plan = hyperband_plan(config.searcher);
    const std::string& where = config.searcher_where.empty() ? file : config.searcher_where;
    if (!plan.ok()) return Status::BadInput(where + ": " + plan.status().message());
  }
  return Status::Ok();
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
  } else if (name == "pbt") {
    searcher = std::make_unique<PbtSearcher>(config, seed);
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
