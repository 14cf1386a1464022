#include "engine/search/hparam_sampler.h"
#include <cmath>

#include <doctest/doctest.h>

#include "engine/config/config.h"
#include "engine/search/single_searcher.h"
#include "test_dir.h"

namespace cairn {

namespace {
ExperimentConfig config_from(const std::string& yaml) {
  testing::TestDir dir;
  auto cfg = parse_experiment_config(yaml, "exp.yaml", dir.path(), {}, ConfigUse::kNewExperiment);
  REQUIRE_MESSAGE(cfg.ok(), cfg.status().message());
  return *cfg;
}
}  // namespace

TEST_CASE("sampling is a pure function of (seed, trial index) and respects the ranges") {
  ExperimentConfig cfg = config_from(R"(
entrypoint: python3 train.py
hyperparameters:
  lr: {type: log, minval: -4, maxval: -1, base: 10}
  hidden: {type: int, minval: 16, maxval: 256}
  dropout: {type: double, minval: 0.0, maxval: 0.5}
  optimizer: {type: categorical, vals: [sgd, adam]}
  batch_size: 64
  arch:
    depth: {type: int, minval: 1, maxval: 4}
searcher: {name: single, metric: val_loss, max_length: 3}
)");
  Json a = sample_hparams(cfg.hyperparameters, 1234, 5);
  CHECK(a == sample_hparams(cfg.hyperparameters, 1234, 5));
  CHECK(a != sample_hparams(cfg.hyperparameters, 1234, 6));
  CHECK(a != sample_hparams(cfg.hyperparameters, 1235, 5));
  for (int k = 1; k <= 200; ++k) {
    Json h = sample_hparams(cfg.hyperparameters, 99, k);
    CHECK(h["lr"].get<double>() >= 1e-4);
    CHECK(h["lr"].get<double>() <= 1e-1);
    CHECK(h["hidden"].get<int>() >= 16);
    CHECK(h["hidden"].get<int>() <= 256);
    CHECK(h["dropout"].get<double>() < 0.5);
    CHECK((h["optimizer"] == "sgd" || h["optimizer"] == "adam"));
    CHECK(h["batch_size"] == 64);
    CHECK(h["arch"]["depth"].get<int>() >= 1);
    CHECK(h["arch"]["depth"].get<int>() <= 4);
  }
  // Keys come out in sorted order, whatever order the config listed them in.
  std::vector<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.push_back(k);
  CHECK(std::is_sorted(keys.begin(), keys.end()));
  CHECK(trial_seed(1234, 1) == trial_seed(1234, 1));
  CHECK(trial_seed(1234, 1) != trial_seed(1234, 2));
  CHECK(trial_seed(1234, 1) < (1ULL << 31));
}

TEST_CASE("a double range is drawn from [minval, maxval), even where rounding would reach maxval") {
  ExperimentConfig cfg = config_from(
      "entrypoint: python3 train.py\nsearcher: {name: single, metric: m, max_length: 1}\n"
      "hyperparameters:\n  momentum: {type: double, minval: 0.5, maxval: 1.0}\n");
  const HyperparameterSpec& momentum = cfg.hyperparameters.at("momentum");
  // 0.5 + 0.5 * (1 - 2^-53) is halfway between the largest double below 1 and 1; it rounds to 1.
  CHECK(range_value(momentum, kLargestUniform) < 1.0);
  CHECK(range_value(momentum, kLargestUniform) == std::nextafter(1.0, 0.0));
  CHECK(range_value(momentum, 0) == 0.5);
  CHECK(range_value(momentum, 0.5) == 0.75);
}

TEST_CASE("the single searcher trains one trial to max_length, then closes it") {
  ExperimentConfig cfg = config_from(
      "entrypoint: python3 train.py\nsearcher: {name: single, metric: val_loss, max_length: 9}\n");
  SingleSearcher searcher(cfg, 7);
  auto start = searcher.start();
  REQUIRE(start.size() == 2);
  CHECK(start[0].kind == SearcherAction::Kind::kCreateTrial);
  CHECK(start[1].kind == SearcherAction::Kind::kTrain);
  CHECK(start[1].length == 9);
  CHECK(searcher.on_validation(1, 4, 0.5).empty());  // an intermediate validation decides nothing
  auto close = searcher.on_validation(1, 9, 0.4);
  REQUIRE(close.size() == 1);
  CHECK(close[0].kind == SearcherAction::Kind::kClose);
  CHECK_FALSE(searcher.finished());
  searcher.on_trial_closed(1);
  CHECK(searcher.finished());
}

}  // namespace cairn
