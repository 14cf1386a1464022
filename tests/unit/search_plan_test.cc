// Searcher::plan(): the trials and units the live status line shows as the search's total.
// Sweeps know theirs exactly; Hyperband's is exact from the start when no trial errors; ASHA's
// grows while early promotions add to a rung; each is never below the work already asked for
// and ends equal to it.
#include <doctest/doctest.h>

#include "engine/search/asha_searcher.h"
#include "engine/search/grid_searcher.h"
#include "engine/search/hyperband_searcher.h"
#include "searcher_simulation.h"

namespace cairn {
namespace {

using testing::InstantTrials;

ExperimentConfig config_with(const std::string& searcher) {
  return testing::searcher_config(R"(
entrypoint: python3 train.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
  y: {type: int, minval: 1, maxval: 100}
searcher: {metric: loss, )" + searcher +
                                  "}\n");
}

double loss_of(const Json& h, int64_t length) {
  return h["x"].get<double>() + h["y"].get<double>() / (50.0 * static_cast<double>(length));
}

// Units asked so far: each trial's latest kTrain length.
int64_t units_asked(const InstantTrials& sim) {
  int64_t units = 0;
  for (const auto& [trial, lengths] : sim.asked)
    if (!lengths.empty()) units += lengths.back();
  return units;
}

// Runs the search, checking after every call that the plan covers what was asked; returns
// the plans seen, first (after start) to last.
std::vector<int64_t> run_watching(Searcher& searcher, InstantTrials& sim) {
  std::vector<int64_t> plans;
  sim.after_call = [&] {
    const SearchPlan plan = searcher.plan();
    REQUIRE(plan.units.has_value());
    CHECK(*plan.units >= units_asked(sim));
    plans.push_back(*plan.units);
  };
  plans.push_back(*searcher.plan().units);
  sim.run();
  return plans;
}

}  // namespace

TEST_CASE("search plan: hyperband's units are exact from the start when no trial errors") {
  const ExperimentConfig cfg = config_with("name: hyperband, max_length: 81, divisor: 3");
  HyperbandSearcher searcher(cfg, 7, 4);
  InstantTrials sim(searcher, 4, loss_of);
  const std::vector<int64_t> plans = run_watching(searcher, sim);
  CHECK(searcher.finished());
  CHECK(searcher.plan().trials == static_cast<int64_t>(sim.hparams.size()));
  for (int64_t units : plans) CHECK(units == sim.units);
  CHECK(units_asked(sim) == sim.units);
}

TEST_CASE("search plan: trials that error lower hyperband's units to what was asked") {
  const ExperimentConfig cfg = config_with("name: hyperband, max_length: 27, divisor: 3");
  HyperbandSearcher searcher(cfg, 7, 3);
  InstantTrials sim(searcher, 3, loss_of);
  // Every fourth trial dies on its way to its first rung, every trial sent on to 9 units dies
  // there: nothing is left to promote to 27.
  sim.fails = [](int64_t trial, int64_t length) { return trial % 4 == 0 || length == 9; };
  const std::vector<int64_t> plans = run_watching(searcher, sim);
  CHECK(searcher.finished());
  CHECK_FALSE(sim.errored.empty());
  CHECK(plans.back() == units_asked(sim));
  CHECK(plans.front() > plans.back());
  for (size_t i = 1; i < plans.size(); ++i) CHECK(plans[i] <= plans[i - 1]);
}

TEST_CASE("search plan: asha's early promotions raise its units, which end exact") {
  // One bracket of 16 (aggressive): the plan says 5 reach 3 units, early promotions send 6.
  const ExperimentConfig cfg = config_with(
      "name: asha, divisor: 3, max_length: 9, max_rungs: 3, max_trials: 16, "
      "mode: aggressive");
  AshaSearcher searcher(cfg, 1234, 1);
  InstantTrials sim(searcher, 1, loss_of);
  const std::vector<int64_t> plans = run_watching(searcher, sim);
  CHECK(searcher.finished());
  CHECK(searcher.plan().trials == 16);
  CHECK(sim.units == 40);  // asha_searcher_test's golden: 16@1 6@3 2@9
  CHECK(plans.front() == 16 * 1 + 5 * 2 + 1 * 6);
  CHECK(plans.back() == 40);
  for (size_t i = 1; i < plans.size(); ++i) CHECK(plans[i] >= plans[i - 1]);
}

TEST_CASE("search plan: a grid trains every trial to max_length") {
  const ExperimentConfig cfg = testing::searcher_config(R"(
entrypoint: python3 train.py
hyperparameters:
  x: {type: categorical, vals: [1, 2, 3]}
searcher: {name: grid, metric: loss, max_length: 5}
)");
  GridSearcher searcher(cfg, 1, 2);
  const SearchPlan plan = searcher.plan();
  CHECK(plan.trials == 3);
  CHECK(plan.units == 15);
}

}  // namespace cairn
