// Hyperband (SPEC §3) driven by instant trials: the golden R=81, η=3 iteration — brackets,
// trials, rung populations, units trained, who is promoted — and trials that error.
#include "engine/search/hyperband_searcher.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "searcher_simulation.h"

namespace cairn {
namespace {

using testing::InstantTrials;

constexpr const char* kHyperband81 = R"(
entrypoint: python3 train.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
  y: {type: int, minval: 1, maxval: 100}
searcher: {name: hyperband, metric: loss, max_length: 81, divisor: 3}
)";

// The instant trial's loss: its ranking changes with the length trained, as real ones do.
double loss_of(const Json& h, int64_t length) {
  return h["x"].get<double>() + h["y"].get<double>() / (50.0 * static_cast<double>(length));
}

// Trials grouped by bracket (the length of their first rung), then by rung length: how
// many validated there.
using Populations = std::map<int64_t, std::map<int64_t, int>>;

Populations populations(const InstantTrials& sim) {
  Populations out;
  for (const auto& [trial, vals] : sim.validations)
    for (const auto& [length, metric] : vals) ++out[sim.asked.at(trial).front()][length];
  return out;
}

// For every rung but the last of every bracket: the trials that went on are exactly the
// best of those that completed it, as many as the next rung holds (ties: lower index).
void check_promoted_are_best(const InstantTrials& sim, const Populations& pops) {
  for (const auto& [first, rungs] : pops) {
    for (auto rung = rungs.begin(); std::next(rung) != rungs.end(); ++rung) {
      const int64_t length = rung->first;
      std::vector<std::pair<double, int64_t>> completed;
      std::set<int64_t> went_on;
      for (const auto& [trial, vals] : sim.validations) {
        if (sim.asked.at(trial).front() != first) continue;
        for (const auto& [l, metric] : vals)
          if (l == length) completed.push_back({metric, trial});
        if (sim.asked.at(trial).back() > length && sim.trained.at(trial) >= length)
          went_on.insert(trial);
      }
      std::sort(completed.begin(), completed.end());
      std::set<int64_t> best;
      for (int i = 0; i < std::next(rung)->second; ++i) best.insert(completed[i].second);
      CAPTURE(first);
      CAPTURE(length);
      CHECK(went_on == best);
    }
  }
}

}  // namespace

TEST_CASE("hyperband R=81 eta=3: 5 brackets, 143 trials, SPEC's rung populations, 1,581 units") {
  const ExperimentConfig cfg = testing::searcher_config(kHyperband81);
  for (int concurrency : {1, 4, 500}) {
    CAPTURE(concurrency);
    HyperbandSearcher searcher(cfg, 1234, concurrency);
    InstantTrials sim(searcher, concurrency, loss_of);
    sim.run();
    CHECK(sim.hparams.size() == 143);
    CHECK(sim.units == 1581);
    const Populations pops = populations(sim);
    CHECK(pops == Populations{{1, {{1, 81}, {3, 27}, {9, 9}, {27, 3}, {81, 1}}},
                              {3, {{3, 34}, {9, 11}, {27, 3}, {81, 1}}},
                              {9, {{9, 15}, {27, 5}, {81, 1}}},
                              {27, {{27, 8}, {81, 2}}},
                              {81, {{81, 5}}}});
    // Created bracket by bracket, the most aggressive first, whatever the concurrency.
    for (int64_t trial = 1; trial <= 143; ++trial) {
      const int64_t first = trial <= 81    ? 1
                            : trial <= 115 ? 3
                            : trial <= 130 ? 9
                            : trial <= 138 ? 27
                                           : 81;
      CHECK(sim.asked[trial].front() == first);
    }
    check_promoted_are_best(sim, pops);
    // Ten trials finish at 81: 1 + 1 + 1 + 2 + 5, bracket by bracket.
    int64_t complete = 0;
    for (const auto& [trial, length] : sim.trained) complete += length == 81;
    CHECK(complete == 10);
    CHECK(searcher.finished());
    CHECK(sim.closed.size() == 143);
    CHECK(sim.close_sent.size() == 143);
  }
}

TEST_CASE("hyperband describes its brackets and rungs for show and watch") {
  const ExperimentConfig cfg = testing::searcher_config(kHyperband81);
  HyperbandSearcher searcher(cfg, 7, 2);
  InstantTrials sim(searcher, 2, loss_of);
  sim.run();
  const Json view = searcher.describe();
  CHECK(view["searcher"] == "hyperband");
  CHECK(view["trials_planned"] == 143);
  CHECK(view["trials_created"] == 143);
  CHECK(view["trials_closed"] == 143);
  REQUIRE(view["brackets"].size() == 5);
  const Json& first = view["brackets"][0];
  CHECK(first["trials_planned"] == 81);
  REQUIRE(first["rungs"].size() == 5);
  const Json& rung = first["rungs"][1];
  CHECK(rung["length"] == 3);
  CHECK(rung["expected"] == 27);
  CHECK(rung["completed"] == 27);
  CHECK(rung["training"] == 0);
  CHECK(rung["promoted"].size() == 9);
  REQUIRE(rung["results"].size() == 27);
  // Results come best first, each with its fate.
  double previous = -1;
  int promoted = 0;
  for (const Json& r : rung["results"]) {
    CHECK(r["metric"].get<double>() >= previous);
    previous = r["metric"].get<double>();
    promoted += r["state"] == "promoted";
    CHECK((r["state"] == "promoted" || r["state"] == "closed"));
  }
  CHECK(promoted == 9);
  // The best so far is the lowest loss seen at any rung.
  double lowest = HUGE_VAL;
  for (const auto& [trial, vals] : sim.validations)
    for (const auto& [length, metric] : vals) lowest = std::min(lowest, metric);
  CHECK(view["best"]["metric"].get<double>() == lowest);
}

TEST_CASE("hyperband finishes when trials error: an errored trial is its rung's worst") {
  const ExperimentConfig cfg = testing::searcher_config(kHyperband81);
  HyperbandSearcher searcher(cfg, 1234, 3);
  InstantTrials sim(searcher, 3, loss_of);
  // Trial 5 dies before its first rung, and every trial sent on to 27 units dies there.
  sim.fails = [](int64_t trial, int64_t length) { return trial == 5 || length == 27; };
  sim.run();
  CHECK(searcher.finished());
  CHECK(sim.hparams.size() == 143);
  CHECK(sim.closed.size() == 143);
  const Populations pops = populations(sim);
  // Bracket s=4 still promotes 27 of its 80 survivors; its rung 27 dies, so nothing
  // reaches 81 there; only bracket s=0 (straight to 81) completes any trial.
  CHECK(pops == Populations{{1, {{1, 80}, {3, 27}, {9, 9}}},
                            {3, {{3, 34}, {9, 11}}},
                            {9, {{9, 15}}},
                            {81, {{81, 5}}}});
  CHECK(sim.errored.count(5) == 1);
  CHECK(sim.trained[5] == 1);
}

TEST_CASE("hyperband never promotes a trial that ended while waiting in its rung") {
  const ExperimentConfig cfg = testing::searcher_config(R"(
entrypoint: python3 train.py
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: hyperband, metric: acc, smaller_is_better: false, max_length: 9}
)");
  // R=9, η=3: brackets 9@1 3@3 1@9 / 5@3 1@9 / 3@9.
  HyperbandSearcher searcher(cfg, 3, 1);
  auto actions = searcher.start();
  REQUIRE(actions.size() == 2);
  CHECK(testing::describe_action(actions[1]) == "train 1 to 1");
  // Trial 1 validates best of all (accuracy, larger is better) and then dies while waiting.
  actions = searcher.on_validation(1, 1, 0.99);
  CHECK(testing::describe_action(actions[0]).rfind("create 2 ", 0) == 0);
  CHECK(searcher.on_trial_closed(1).empty());  // still one trial busy: nothing to create
  std::vector<std::string> last;
  for (int64_t trial = 2; trial <= 9; ++trial)
    last = testing::describe_actions(searcher.on_validation(trial, 1, 0.1 * trial));
  // Rung 1 decides: the best three alive (9, 8, 7) go on; the others close, best first;
  // trial 1, already gone, gets nothing. Three trials now train: nothing new is created.
  CHECK(last == std::vector<std::string>{"train 9 to 3", "train 8 to 3", "train 7 to 3", "close 6",
                                         "close 5", "close 4", "close 3", "close 2"});
}

}  // namespace cairn
