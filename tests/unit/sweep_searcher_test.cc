// Grid and random search: the grid's points and their order, `count`, the max_trials cap,
// lazy creation, and that random search is a pure function of the seed.
#include <doctest/doctest.h>

#include "engine/search/grid_points.h"
#include "engine/search/grid_searcher.h"
#include "engine/search/hparam_sampler.h"
#include "engine/search/random_searcher.h"
#include "searcher_simulation.h"

namespace cairn {
namespace {

using testing::InstantTrials;

constexpr const char* kGrid = R"(
entrypoint: python3 train.py
hyperparameters:
  optimizer: {type: categorical, vals: [sgd, adam]}
  lr: {type: log, minval: -3, maxval: -1, base: 10, count: 3}
  dropout: {type: double, minval: 0, maxval: 0.5, count: 3}
  batch_size: 64
  arch:
    width: {type: int, minval: 0, maxval: 10, count: 3}
    depth: {type: int, minval: 1, maxval: 2, count: 5}
  layers: {type: int, minval: 1, maxval: 3}
searcher: {name: grid, metric: loss, max_length: 4}
)";

double loss_of(const Json& h, int64_t length) {
  return h["dropout"].get<double>() + 1.0 / static_cast<double>(length);
}

HyperparameterSpec range(HyperparameterSpec::Type type, double lo, double hi,
                         std::optional<int> count) {
  HyperparameterSpec spec;
  spec.type = type;
  spec.minval = lo;
  spec.maxval = hi;
  spec.count = count;
  return spec;
}

std::vector<double> numbers(const std::vector<Json>& values) {
  std::vector<double> out;
  for (const Json& v : values) out.push_back(v.get<double>());
  return out;
}

}  // namespace

TEST_CASE("grid values of each hyperparameter type, with and without count") {
  using Type = HyperparameterSpec::Type;
  auto values = [](const HyperparameterSpec& spec) {
    auto v = grid_values(spec);
    REQUIRE_MESSAGE(v.ok(), v.status().message());
    return *v;
  };
  CHECK(numbers(values(range(Type::kInt, 1, 4, std::nullopt))) == std::vector<double>{1, 2, 3, 4});
  // 0, 3.33, 6.67, 10 rounded to the nearest.
  CHECK(numbers(values(range(Type::kInt, 0, 10, 4))) == std::vector<double>{0, 3, 7, 10});
  // More points than integers: every integer once.
  CHECK(numbers(values(range(Type::kInt, 1, 3, 10))) == std::vector<double>{1, 2, 3});
  // Halves round away from zero; one point is the (rounded) midpoint.
  CHECK(numbers(values(range(Type::kInt, -5, 0, 3))) == std::vector<double>{-5, -3, 0});
  CHECK(numbers(values(range(Type::kInt, 1, 4, 1))) == std::vector<double>{3});
  CHECK(values(range(Type::kInt, 1, 4, 2))[0].is_number_integer());
  CHECK(numbers(values(range(Type::kDouble, 0, 1, 5))) ==
        std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  CHECK(numbers(values(range(Type::kDouble, 0, 1, 1))) == std::vector<double>{0.5});
  HyperparameterSpec log = range(Type::kLog, -4, -1, 4);
  const auto lrs = numbers(values(log));
  REQUIRE(lrs.size() == 4);
  CHECK(lrs[0] == doctest::Approx(1e-4));
  CHECK(lrs[1] == doctest::Approx(1e-3));
  CHECK(lrs[3] == doctest::Approx(1e-1));
  log.count = 1;
  log.base = 2;
  CHECK(numbers(values(log))[0] == doctest::Approx(std::pow(2, -2.5)));
  // A double or log range needs count.
  auto missing = grid_values(range(Type::kDouble, 0, 1, std::nullopt));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().rfind("count: ", 0) == 0);
  std::map<std::string, HyperparameterSpec> specs{{"lr", range(Type::kLog, -4, -1, std::nullopt)}};
  auto grid = HyperparameterGrid::build(specs);
  REQUIRE_FALSE(grid.ok());
  CHECK(grid.status().message().rfind("hyperparameters.lr.count: ", 0) == 0);
}

TEST_CASE("grid: the cartesian product in sorted key order, the first key slowest") {
  const ExperimentConfig cfg = testing::searcher_config(kGrid);
  GridSearcher searcher(cfg, 42, 3);
  InstantTrials sim(searcher, 3, loss_of);
  sim.run();
  // arch.depth 2 × arch.width 3 × batch_size 1 × dropout 3 × layers 3 × lr 3 × optimizer 2.
  REQUIRE(sim.hparams.size() == 324);
  CHECK(searcher.finished());
  CHECK(sim.closed.size() == 324);
  CHECK(sim.max_outstanding == 3);  // created lazily, three at a time
  CHECK(sim.units == 324 * 4);      // each trained to max_length once
  std::set<std::string> distinct;
  for (const auto& [trial, h] : sim.hparams) {
    distinct.insert(h.dump());
    CHECK(sim.asked[trial] == std::vector<int64_t>{4});
    CHECK(sim.seeds[trial] == trial_seed(42, trial));
  }
  CHECK(distinct.size() == 324);
  const Json& first = sim.hparams[1];
  CHECK(
      first.dump() ==
      R"({"arch":{"depth":1,"width":0},"batch_size":64,"dropout":0.0,"layers":1,"lr":0.001,"optimizer":"sgd"})");
  CHECK(sim.hparams[2]["optimizer"] == "adam");  // the last key varies fastest
  CHECK(sim.hparams[3]["lr"].get<double>() == doctest::Approx(0.01));
  CHECK(sim.hparams[3]["optimizer"] == "sgd");
  CHECK(sim.hparams[7]["layers"] == 2);
  const Json& last = sim.hparams[324];
  CHECK(last["arch"] == Json{{"depth", 2}, {"width", 10}});
  CHECK(last["dropout"] == 0.5);
  CHECK(last["layers"] == 3);
  CHECK(last["lr"].get<double>() == doctest::Approx(0.1));
  CHECK(last["optimizer"] == "adam");
  const Json view = searcher.describe();
  CHECK(view["searcher"] == "grid");
  CHECK(view["trials_planned"] == 324);
  CHECK(view["best"]["metric"].get<double>() == doctest::Approx(0.25));
}

TEST_CASE("grid: max_trials takes the first points; an errored trial makes room for the next") {
  ExperimentConfig cfg = testing::searcher_config(kGrid);
  cfg.searcher.max_trials = 5;
  GridSearcher searcher(cfg, 42, 2);
  InstantTrials sim(searcher, 2, loss_of);
  sim.fails = [](int64_t trial, int64_t) { return trial == 2; };
  sim.run();
  REQUIRE(sim.hparams.size() == 5);
  CHECK(searcher.finished());
  GridSearcher uncapped(testing::searcher_config(kGrid), 42, 10);
  const auto all = uncapped.start();
  for (int64_t trial = 1; trial <= 5; ++trial)
    CHECK(sim.hparams[trial] == all[2 * (trial - 1)].hparams);
}

TEST_CASE("grid with no hyperparameters is one trial") {
  const ExperimentConfig cfg = testing::searcher_config(
      "entrypoint: python3 train.py\nsearcher: {name: grid, metric: loss, max_length: 2}\n");
  GridSearcher searcher(cfg, 1, 4);
  InstantTrials sim(searcher, 4, [](const Json&, int64_t) { return 1.0; });
  sim.run();
  CHECK(sim.hparams.size() == 1);
  CHECK(sim.hparams[1] == Json::object());
  CHECK(searcher.finished());
}

TEST_CASE("random: the same seed gives the same trials, another seed others") {
  const ExperimentConfig cfg = testing::searcher_config(R"(
entrypoint: python3 train.py
hyperparameters:
  lr: {type: log, minval: -4, maxval: -1}
  dropout: {type: double, minval: 0, maxval: 0.5}
  arch: {depth: {type: int, minval: 1, maxval: 4}}
searcher: {name: random, metric: loss, max_length: 3, max_trials: 12}
)");
  auto run = [&](uint64_t seed, int concurrency) {
    RandomSearcher searcher(cfg, seed, concurrency);
    InstantTrials sim(searcher, concurrency, loss_of);
    sim.run();
    CHECK(searcher.finished());
    CHECK(sim.hparams.size() == 12);
    CHECK(sim.max_outstanding == static_cast<size_t>(concurrency));
    for (const auto& [trial, h] : sim.hparams) {
      CHECK(h == sample_hparams(cfg.hyperparameters, seed, trial));
      CHECK(sim.seeds[trial] == trial_seed(seed, trial));
    }
    return std::make_pair(sim.hparams, sim.seeds);
  };
  const auto a = run(1234, 1);
  CHECK(a == run(1234, 4));  // and independent of how many run at once
  const auto b = run(1235, 1);
  CHECK(a.first != b.first);
  CHECK(a.second != b.second);
}

}  // namespace cairn
