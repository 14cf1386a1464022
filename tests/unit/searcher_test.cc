// Every searcher through make_searcher: which one each name builds, the configs only a
// searcher can refuse, and crash safety — a searcher rebuilt by replaying the calls the
// coordinator logged makes exactly the decisions of the one that never stopped.
#include "engine/search/searcher_factory.h"

#include <doctest/doctest.h>

#include "searcher_simulation.h"

namespace cairn {
namespace {

using testing::InstantTrials;

ExperimentConfig config_for(const std::string& searcher) {
  return testing::searcher_config(R"(
entrypoint: python3 train.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1, count: 4}
  y: {type: int, minval: 1, maxval: 100, count: 5}
  opt: {type: categorical, vals: [sgd, adam]}
searcher: {metric: loss, )" + searcher +
                                  "}\n");
}

double loss_of(const Json& h, int64_t length) {
  return h["x"].get<double>() + h["y"].get<double>() / (50.0 * static_cast<double>(length));
}

std::unique_ptr<Searcher> make(const ExperimentConfig& cfg, uint64_t seed, int concurrency) {
  auto searcher = make_searcher(cfg, seed, concurrency);
  REQUIRE_MESSAGE(searcher.ok(), searcher.status().message());
  return std::move(*searcher);
}

// Runs a search (some trials erroring), then rebuilds it from the logged calls, cut at
// several points: after the cut, the rebuilt searcher must answer exactly as the original.
void check_replay(const ExperimentConfig& cfg, int concurrency) {
  auto original = make(cfg, 2024, concurrency);
  InstantTrials sim(*original, concurrency, loss_of);
  sim.fails = [](int64_t trial, int64_t length) { return trial % 7 == 3 && length > 1; };
  sim.run();
  REQUIRE(original->finished());
  const size_t n = sim.calls.size();
  for (size_t cut : {size_t{0}, n / 3, n / 2, n - 1, n}) {
    CAPTURE(cut);
    auto rebuilt = make(cfg, 2024, concurrency);
    CHECK(testing::describe_actions(rebuilt->start()) == sim.answers[0]);
    for (size_t i = 0; i < cut; ++i) deliver(*rebuilt, sim.calls[i]);  // answers discarded
    for (size_t i = cut; i < n; ++i)
      REQUIRE(testing::describe_actions(deliver(*rebuilt, sim.calls[i])) == sim.answers[i + 1]);
    CHECK(rebuilt->finished());
    CHECK(rebuilt->describe() == original->describe());
  }
}

}  // namespace

TEST_CASE("make_searcher builds the searcher the config names") {
  const std::pair<std::string, std::string> cases[] = {
      {"name: grid, max_length: 3", "grid"},
      {"name: random, max_length: 3, max_trials: 4", "random"},
      {"name: hyperband, max_length: 9", "hyperband"},
      {"name: asha, max_length: 9, max_trials: 9", "asha"},
      {"name: adaptive_asha, max_length: 9, max_trials: 9", "asha"},
      {"name: async_halving, max_length: 9, max_trials: 9", "asha"},
      {"name: tpe, max_length: 3, max_trials: 4", "random"},
  };
  for (const auto& [searcher, name] : cases) {
    CAPTURE(searcher);
    CHECK(make(config_for(searcher), 1, 2)->describe()["searcher"] == name);
  }
  // single has nothing to add to show and watch.
  CHECK(make(config_for("name: single, max_length: 3"), 1, 2)->describe() == Json::object());
}

TEST_CASE("make_searcher: concurrency below 1 counts as 1; the two-argument form is 1") {
  const ExperimentConfig cfg = config_for("name: random, max_length: 3, max_trials: 4");
  CHECK(make(cfg, 1, 0)->start().size() == 2);  // one trial: create + train
  auto plain = make_searcher(cfg, 1);
  REQUIRE(plain.ok());
  CHECK(testing::describe_actions((*plain)->start()) ==
        testing::describe_actions(make(cfg, 1, 1)->start()));
  CHECK(make(cfg, 1, 3)->start().size() == 6);
}

TEST_CASE("make_searcher refuses what only the searcher can judge, naming file and key") {
  auto hyperband =
      make_searcher(config_for("name: hyperband, max_length: 1000, divisor: 1.01"), 1, 1);
  REQUIRE_FALSE(hyperband.ok());
  CHECK(hyperband.status().exit_code() == 2);
  CHECK(hyperband.status().message().find("exp.yaml:7: searcher.divisor: hyperband with max_length "
                                          "1000, min_length 1 and divisor 1.01 has") !=
        std::string::npos);
  auto huge = make_searcher(config_for("name: hyperband, max_length: 1000000, divisor: 2"), 1, 1);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().message().find("exp.yaml:7: searcher.max_trials: ") != std::string::npos);
  CHECK(make_searcher(
            config_for("name: hyperband, max_length: 1000000, divisor: 2, max_trials: 50"), 1, 1)
            .ok());
  // A config validated for random, switched to grid behind the parser's back.
  ExperimentConfig grid = testing::searcher_config(R"(
entrypoint: python3 train.py
hyperparameters: {lr: {type: log, minval: -4, maxval: -1}}
searcher: {name: random, metric: loss, max_length: 3, max_trials: 2}
)");
  grid.searcher.name = "grid";
  auto refused = make_searcher(grid, 1, 1);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("exp.yaml: hyperparameters.lr.count: ") !=
        std::string::npos);
  grid.searcher.name = "bayes";
  CHECK(make_searcher(grid, 1, 1).status().kind() == ErrorKind::kBadInput);
}

TEST_CASE("a searcher rebuilt by replaying its calls decides exactly as the original") {
  const char* searchers[] = {
      "name: single, max_length: 3",
      "name: grid, max_length: 3, max_trials: 25",
      "name: random, max_length: 3, max_trials: 12",
      "name: hyperband, max_length: 27",
      "name: hyperband, max_length: 30, divisor: 2.5, min_length: 2",
      "name: asha, max_length: 27, max_rungs: 4, max_trials: 40, mode: aggressive",
      "name: asha, max_length: 27, max_rungs: 4, max_trials: 40, mode: standard",
      "name: asha, max_length: 27, max_rungs: 4, max_trials: 40, mode: conservative",
  };
  for (const char* searcher : searchers) {
    for (int concurrency : {1, 3}) {
      CAPTURE(searcher);
      CAPTURE(concurrency);
      check_replay(config_for(searcher), concurrency);
    }
  }
}

TEST_CASE("every searcher finishes when every trial reports an infinite or missing metric") {
  const char* searchers[] = {
      "name: grid, max_length: 3, max_trials: 6",
      "name: random, max_length: 3, max_trials: 6",
      "name: hyperband, max_length: 9",
      "name: asha, max_length: 9, max_rungs: 3, max_trials: 12",
  };
  for (const char* searcher : searchers) {
    for (const char* direction : {"true", "false"}) {
      for (double metric : {HUGE_VAL, -HUGE_VAL, double{NAN}}) {
        CAPTURE(searcher);
        CAPTURE(direction);
        CAPTURE(metric);
        const ExperimentConfig cfg =
            config_for(std::string(searcher) + ", smaller_is_better: " + direction);
        auto s = make(cfg, 3, 2);
        InstantTrials sim(*s, 2, [metric](const Json&, int64_t) { return metric; });
        sim.run();
        CHECK(s->finished());
        CHECK(sim.closed.size() == sim.hparams.size());
        CHECK(s->describe()["best"].is_object());
        CHECK(s->describe()["best"]["metric"].is_null());  // JSON has no infinity
      }
    }
  }
}

TEST_CASE("set_concurrency: more room creates trials at once, less lets running ones finish") {
  for (const char* searcher :
       {"name: random, max_length: 3, max_trials: 8", "name: hyperband, max_length: 9",
        "name: asha, max_length: 9, max_rungs: 3, max_trials: 8"}) {
    CAPTURE(searcher);
    auto s = make(config_for(searcher), 5, 1);
    CHECK(s->start().size() == 2);
    const auto more = testing::describe_actions(s->set_concurrency(3));
    REQUIRE(more.size() == 4);  // trials 2 and 3: created and sent to train
    CHECK(more[0].rfind("create 2 ", 0) == 0);
    CHECK(more[2].rfind("create 3 ", 0) == 0);
    CHECK(s->set_concurrency(1).empty());  // nothing is taken back
    // Trial 1 stops at its first rung (random: short of max_length), so one slot frees up;
    // but trials 2 and 3 still train, more than the new concurrency of 1: nothing new.
    CHECK(s->on_validation(1, 1, 0.5).empty());
  }
}

}  // namespace cairn
