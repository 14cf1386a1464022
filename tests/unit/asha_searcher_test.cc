// ASHA (SPEC §3) driven by instant trials: golden tables for every mode and two
// concurrencies, the promotion rule checked at every promotion, and trials that error.
#include "engine/search/asha_searcher.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "engine/search/bracket_plan.h"
#include "searcher_simulation.h"

namespace cairn {
namespace {

using testing::InstantTrials;

ExperimentConfig asha_config(const std::string& searcher) {
  return testing::searcher_config(R"(
entrypoint: python3 train.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
  y: {type: int, minval: 1, maxval: 100}
searcher: {name: asha, metric: loss, divisor: 3, )" +
                                  searcher + "}\n");
}

double loss_of(const Json& h, int64_t length) {
  return h["x"].get<double>() + h["y"].get<double>() / (50.0 * static_cast<double>(length));
}

// "F: N@L … | … | units=U | at M: trials…": for each bracket (by its first length F), how
// many trials validated at each length L; the units trained; who reached max_length M.
std::string summary(const InstantTrials& sim, int64_t max_length) {
  std::map<int64_t, std::map<int64_t, int>> pops;
  std::vector<int64_t> complete;
  for (const auto& [trial, vals] : sim.validations) {
    for (const auto& [length, metric] : vals) ++pops[sim.asked.at(trial).front()][length];
    if (vals.back().first == max_length) complete.push_back(trial);
  }
  std::string out;
  for (const auto& [first, rungs] : pops) {
    out += std::to_string(first) + ":";
    for (const auto& [length, n] : rungs)
      out += " " + std::to_string(n) + "@" + std::to_string(length);
    out += " | ";
  }
  out += "units=" + std::to_string(sim.units) + " | at " + std::to_string(max_length) + ":";
  for (int64_t trial : complete) out += " " + std::to_string(trial);
  return out;
}

// ASHA's rule, checked at the moment of every promotion: the trial was among the best
// ⌊n/η⌋ of the n trials that had completed its rung (errored ones count, as the worst).
void check_every_promotion(const InstantTrials& sim, double eta) {
  REQUIRE(sim.promotions.size() == sim.rung_at_promotion.size());
  for (size_t i = 0; i < sim.promotions.size(); ++i) {
    auto rung = sim.rung_at_promotion[i];
    std::sort(rung.begin(), rung.end(), [](const auto& a, const auto& b) {
      const double la = std::isnan(a.second) ? HUGE_VAL : a.second;
      const double lb = std::isnan(b.second) ? HUGE_VAL : b.second;
      return std::tie(la, a.first) < std::tie(lb, b.first);
    });
    const auto top = static_cast<size_t>(std::floor(rung.size() / eta + 1e-9));
    const int64_t trial = std::get<0>(sim.promotions[i]);
    size_t rank = 0;
    while (rank < rung.size() && rung[rank].first != trial) ++rank;
    CAPTURE(trial);
    CHECK(rank < top);
  }
}

void check_all_closed(const Searcher& searcher, const InstantTrials& sim, size_t trials) {
  CHECK(searcher.finished());
  CHECK(sim.hparams.size() == trials);
  CHECK(sim.closed.size() == trials);
}

}  // namespace

struct Golden {
  const char* mode;
  int concurrency;
  const char* expected;
};

void check_goldens(const std::string& searcher, int64_t max_length, size_t trials,
                   const std::vector<Golden>& goldens) {
  for (const Golden& g : goldens) {
    CAPTURE(g.mode);
    CAPTURE(g.concurrency);
    const ExperimentConfig cfg = asha_config(searcher + ", mode: " + g.mode);
    AshaSearcher searcher(cfg, 1234, g.concurrency);
    InstantTrials sim(searcher, g.concurrency, loss_of);
    sim.run();
    CHECK(summary(sim, max_length) == g.expected);
    check_every_promotion(sim, 3);
    check_all_closed(searcher, sim, trials);
  }
}

TEST_CASE("asha golden tables: 16 trials, rungs 1, 3, 9, every mode") {
  check_goldens(
      "max_length: 9, max_rungs: 3, max_trials: 16", 9, 16,
      {
          // One bracket of 16: early promotions send 6 (not ⌊16/3⌋) on to 3 units.
          {"aggressive", 1, "1: 16@1 6@3 2@9 | units=40 | at 9: 4 10"},
          {"aggressive", 4, "1: 16@1 6@3 2@9 | units=40 | at 9: 4 10"},
          // Brackets of 3 and 2 rungs: 11 + 5 trials.
          {"standard", 1, "1: 11@1 3@3 1@9 | 3: 5@3 1@9 | units=44 | at 9: 2 4"},
          {"standard", 4, "1: 11@1 3@3 1@9 | 3: 5@3 1@9 | units=44 | at 9: 2 4"},
          // Brackets of 3, 2 and 1 rungs: 10 + 4 + 2 trials.
          {"conservative", 1, "1: 10@1 3@3 1@9 | 3: 4@3 1@9 | 9: 2@9 | units=58 | at 9: 3 4 6 11"},
          {"conservative", 4, "1: 10@1 3@3 1@9 | 3: 4@3 1@9 | 9: 2@9 | units=58 | at 9: 3 4 6 11"},
      });
}

TEST_CASE("asha golden tables: 40 trials, rungs 1, 3, 9, 27, every mode") {
  check_goldens(
      "max_length: 27, max_rungs: 4, max_trials: 40", 27, 40,
      {
          {"aggressive", 1, "1: 40@1 15@3 7@9 2@27 | units=148 | at 27: 4 29"},
          {"aggressive", 8, "1: 40@1 15@3 7@9 2@27 | units=148 | at 27: 4 29"},
          // Brackets of 4, 3 and 2 rungs: 25 + 10 + 5 trials.
          {"standard", 1,
           "1: 25@1 10@3 5@9 2@27 | 3: 10@3 3@9 1@27 | 9: 5@9 2@27 | units=258 | at 27: 3 4 6 "
           "29 35"},
          {"standard", 8,
           "1: 25@1 10@3 5@9 2@27 | 3: 10@3 3@9 1@27 | 9: 5@9 2@27 | units=258 | at 27: 3 4 6 "
           "29 35"},
          // Brackets of 4, 3, 2 and 1 rungs: 24 + 9 + 4 + 3 trials.
          {"conservative", 1,
           "1: 24@1 10@3 6@9 2@27 | 3: 9@3 4@9 2@27 | 9: 4@9 1@27 | 27: 3@27 | units=338 | at "
           "27: 4 6 13 17 20 29 30 36"},
          {"conservative", 8,
           "1: 24@1 10@3 6@9 2@27 | 3: 9@3 4@9 2@27 | 9: 4@9 1@27 | 27: 3@27 | units=338 | at "
           "27: 4 6 13 17 20 29 30 36"},
      });
}

TEST_CASE("asha finishes when trials error, counting each as its rung's worst") {
  const ExperimentConfig cfg =
      asha_config("max_length: 27, max_rungs: 4, max_trials: 40, mode: standard");
  for (int concurrency : {1, 5}) {
    CAPTURE(concurrency);
    AshaSearcher searcher(cfg, 99, concurrency);
    InstantTrials sim(searcher, concurrency, loss_of);
    // Every third trial dies before its first rung; every trial sent on to 9 dies there.
    sim.fails = [](int64_t trial, int64_t length) { return trial % 3 == 0 || length == 9; };
    sim.run();
    check_all_closed(searcher, sim, 40);
    check_every_promotion(sim, 3);
    for (const auto& [trial, length] : sim.trained) CHECK(length <= 9);
    CHECK_FALSE(sim.errored.empty());
  }
}

TEST_CASE("asha takes infinite and NaN metrics as valid worst values") {
  const ExperimentConfig cfg =
      asha_config("max_length: 9, max_rungs: 3, max_trials: 16, mode: standard");
  auto run = [&](double bad) {
    AshaSearcher searcher(cfg, 5, 2);
    // Half the trials report no usable metric.
    InstantTrials sim(searcher, 2, [bad](const Json& h, int64_t length) {
      return h["y"].get<int>() % 2 == 0 ? bad : loss_of(h, length);
    });
    sim.run();
    check_all_closed(searcher, sim, 16);
    check_every_promotion(sim, 3);
    return sim.answers;
  };
  const auto with_inf = run(HUGE_VAL);
  CHECK(with_inf == run(NAN));  // a NaN is the worst value, exactly like +inf
}

TEST_CASE("asha with larger-is-better metrics decides exactly as with their negation") {
  auto run = [](const std::string& direction, double sign) {
    const ExperimentConfig cfg = asha_config(
        "max_length: 27, max_rungs: 4, max_trials: 40, mode: conservative, smaller_is_better: " +
        direction);
    AshaSearcher searcher(cfg, 11, 3);
    InstantTrials sim(searcher, 3,
                      [sign](const Json& h, int64_t length) { return sign * loss_of(h, length); });
    sim.run();
    return sim.answers;
  };
  CHECK(run("true", 1) == run("false", -1));
}

TEST_CASE("asha describes its brackets, rungs, promotions and best so far") {
  const ExperimentConfig cfg =
      asha_config("max_length: 9, max_rungs: 3, max_trials: 16, mode: standard");
  AshaSearcher searcher(cfg, 1234, 4);
  CHECK(searcher.describe()["best"].is_null());
  InstantTrials sim(searcher, 4, loss_of);
  sim.run();
  const Json view = searcher.describe();
  CHECK(view["searcher"] == "asha");
  CHECK(view["trials_planned"] == 16);
  CHECK(view["trials_closed"] == 16);
  REQUIRE(view["brackets"].size() == 2);
  const Json& first = view["brackets"][0];
  CHECK(first["trials_planned"] == 11);
  CHECK(first["trials_created"] == 11);
  REQUIRE(first["rungs"].size() == 3);
  CHECK(first["rungs"][0]["length"] == 1);
  CHECK(first["rungs"][0]["expected"] == 11);
  CHECK(first["rungs"][0]["completed"] == 11);
  CHECK(first["rungs"][0]["promoted"].size() == 3);
  CHECK(first["rungs"][2]["length"] == 9);
  CHECK(first["rungs"][2]["results"][0]["state"] == "closed");
  for (const Json& bracket : view["brackets"])
    for (const Json& rung : bracket["rungs"]) {
      CHECK(rung["training"] == 0);
      for (const Json& r : rung["results"]) CHECK(r["state"] != "waiting");
    }
  CHECK(view["best"]["trial"].is_number_integer());
  CHECK(view["best"]["length"].is_number_integer());
}

TEST_CASE("asha keeps `concurrency` trials busy and creates no more than max_trials") {
  const ExperimentConfig cfg =
      asha_config("max_length: 9, max_rungs: 3, max_trials: 16, mode: aggressive");
  AshaSearcher searcher(cfg, 1, 4);
  const auto start = searcher.start();
  REQUIRE(start.size() == 8);  // four trials, each created and sent to the first rung
  for (size_t i = 0; i < start.size(); i += 2) {
    CHECK(start[i].kind == SearcherAction::Kind::kCreateTrial);
    CHECK(start[i + 1].kind == SearcherAction::Kind::kTrain);
    CHECK(start[i + 1].length == 1);
  }
  // Trial 1 validates first of its rung: nothing to promote yet, so it waits (no action for
  // it) and trial 5 takes its place.
  const auto next = testing::describe_actions(searcher.on_validation(1, 1, 0.5));
  REQUIRE(next.size() == 2);
  CHECK(next[0].rfind("create 5 ", 0) == 0);
  CHECK(next[1] == "train 5 to 1");
  // Validations of unknown trials, or of a length short of the rung, decide nothing.
  CHECK(searcher.on_validation(77, 1, 0.1).empty());
  CHECK(searcher.on_validation(1, 1, 0.1).empty());
  CHECK(searcher.on_trial_closed(77).empty());
}

}  // namespace cairn

namespace cairn {

TEST_CASE("asha stop_once (Determined's): each trial is promoted or stopped on arrival") {
  for (int concurrency : {1, 4}) {
    CAPTURE(concurrency);
    const ExperimentConfig cfg = asha_config(
        "max_length: 9, max_rungs: 3, max_trials: 16, mode: aggressive, stop_once: true");
    REQUIRE(cfg.searcher.stop_once);
    AshaSearcher searcher(cfg, 1234, concurrency);
    InstantTrials sim(searcher, concurrency, loss_of);
    sim.run();
    check_all_closed(searcher, sim, 16);
    // A promotion went to a trial among the best max(1, ⌊n/η⌋) of the n that had reached
    // the rung, itself included: the first to arrive always goes on.
    for (size_t i = 0; i < sim.promotions.size(); ++i) {
      auto rung = sim.rung_at_promotion[i];
      std::sort(rung.begin(), rung.end(), [](const auto& a, const auto& b) {
        return std::tie(a.second, a.first) < std::tie(b.second, b.first);
      });
      const auto top =
          std::max<size_t>(1, static_cast<size_t>(std::floor(rung.size() / 3.0 + 1e-9)));
      size_t rank = 0;
      while (rank < rung.size() && rung[rank].first != std::get<0>(sim.promotions[i])) ++rank;
      CHECK(rank < top);
    }
    // It goes on unless there is evidence against it: more trials train on than under plain
    // aggressive ASHA ("16@1 6@3 2@9 | units=40", the golden table above).
    CHECK(summary(sim, 9) == "1: 16@1 7@3 4@9 | units=54 | at 9: 1 2 4 10");
  }
}

}  // namespace cairn
