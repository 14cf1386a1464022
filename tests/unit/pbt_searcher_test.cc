#include "engine/search/pbt_searcher.h"

#include <doctest/doctest.h>

#include "searcher_simulation.h"

namespace cairn {

using testing::InstantTrials;
using testing::searcher_config;

namespace {

const char* kPbt = R"(name: pbt
entrypoint: python3 train.py
hyperparameters:
  x: {type: double, minval: 0.1, maxval: 1.0}
  width: {type: int, minval: 4, maxval: 64}
  act: {type: categorical, vals: [relu, tanh, gelu]}
  depth: 3
searcher:
  name: pbt
  metric: loss
  max_length: 8
  population_size: 8
  perturbation_interval: 2
  quantile_fraction: 0.25
)";

// Smaller is better: the closer x is to 0.7, the better, the longer the better.
double loss(const Json& h, int64_t length) {
  return std::abs(h["x"].get<double>() - 0.7) + 1.0 / static_cast<double>(length);
}

}  // namespace

TEST_CASE("pbt replaces each generation's bottom quantile by perturbed clones of its top") {
  const ExperimentConfig config = searcher_config(kPbt);
  PbtSearcher searcher(config, 42);
  // Generations are numbered from 1, as docs/search.md does: generation g trains to g · 2.
  CHECK(searcher.describe()["generation"] == 1);
  InstantTrials sim(searcher, 8, loss);
  sim.run();
  CHECK(searcher.finished());
  // 8 members, 2 replaced in each of the generations ending at 2, 4 and 6 (not at 8).
  CHECK(sim.hparams.size() == 8 + 3 * 2);
  CHECK(sim.close_sent.size() == sim.hparams.size());
  const Json view = searcher.describe();
  CHECK(view["generation"] == 4);
  CHECK(view["length"] == 8);
  REQUIRE(view["lineage"].size() == 6);
  for (const Json& clone : view["lineage"]) {
    const int64_t child = clone["trial"].get<int64_t>();
    const int64_t parent = clone["parent"].get<int64_t>();
    const int64_t at = clone["cloned_at"].get<int64_t>();
    CAPTURE(child);
    CHECK((at == 2 || at == 4 || at == 6));
    // It trains on from where its parent's checkpoint is, a generation at a time, never
    // from 0 (to the end, unless a later generation replaced it in turn).
    CHECK(sim.asked[child].front() == at + 2);
    for (size_t k = 1; k < sim.asked[child].size(); ++k)
      CHECK(sim.asked[child][k] == sim.asked[child][k - 1] + 2);
    CHECK(sim.asked[child].back() <= 8);
    // Its parent was in the top quarter of the generation at `at`: no better than 2nd.
    std::vector<double> at_length;
    for (const auto& [trial, vals] : sim.validations)
      for (const auto& [length, metric] : vals)
        if (length == at) at_length.push_back(metric);
    std::sort(at_length.begin(), at_length.end());
    double parent_metric = 0;
    for (const auto& [length, metric] : sim.validations[parent])
      if (length == at) parent_metric = metric;
    CHECK(parent_metric <= at_length[1]);
    // Perturbed: x by 0.8 or 1.2 within its range, width likewise and rounded, the constant
    // kept, the categorical one of its values.
    const Json& p = sim.hparams[parent];
    const Json& c = sim.hparams[child];
    const double px = p["x"].get<double>(), cx = c["x"].get<double>();
    CHECK((cx == doctest::Approx(std::clamp(px * 0.8, 0.1, 1.0)) ||
           cx == doctest::Approx(std::min(px * 1.2, std::nextafter(1.0, 0.0)))));
    const int64_t pw = p["width"].get<int64_t>(), cw = c["width"].get<int64_t>();
    CHECK((cw == std::clamp<int64_t>(std::llround(pw * 0.8), 4, 64) ||
           cw == std::clamp<int64_t>(std::llround(pw * 1.2), 4, 64)));
    CHECK(c["depth"] == 3);
    CHECK((c["act"] == "relu" || c["act"] == "tanh" || c["act"] == "gelu"));
  }
}

TEST_CASE("pbt decides the same whatever the order and timing of the validations") {
  const ExperimentConfig config = searcher_config(kPbt);
  PbtSearcher one(config, 7), other(config, 7);
  InstantTrials a(one, 8, loss), b(other, 3, loss);  // different concurrency, so order
  a.run();
  b.run();
  CHECK(a.hparams == b.hparams);
  CHECK(one.describe()["lineage"] == other.describe()["lineage"]);
  // And a replay of the calls gives the same answers (what resume relies on).
  PbtSearcher replayed(config, 7);
  InstantTrials c(replayed, 8, loss);
  c.run();
  CHECK(c.answers == a.answers);
}

TEST_CASE("a member that errors is replaced by a clone, and the search still ends") {
  const ExperimentConfig config = searcher_config(kPbt);
  PbtSearcher searcher(config, 3);
  InstantTrials sim(searcher, 8, loss);
  sim.fails = [](int64_t trial, int64_t length) { return trial == 2 && length == 4; };
  sim.run();
  CHECK(searcher.finished());
  // Trial 2 ended by itself on its way to 4: ranked last of that generation, so replaced
  // (no close sent for it), and the population stays at 8.
  CHECK(sim.errored.count(2) == 1);
  CHECK(sim.close_sent.count(2) == 0);
  CHECK(sim.hparams.size() == 8 + 3 * 2);
  int clones_at_4 = 0;
  const Json view = searcher.describe();
  for (const Json& clone : view["lineage"]) clones_at_4 += clone["cloned_at"] == 4;
  CHECK(clones_at_4 == 2);
}

TEST_CASE("perturbation rules: factors, resampling, and ranges kept") {
  ExperimentConfig config = searcher_config(kPbt);
  config.searcher.perturbations["x"] = {{2.0}, 0.0};
  config.searcher.perturbations["act"] = {{0.8, 1.2}, 1.0};
  const Json parent{{"x", 0.4}, {"width", 60}, {"act", "relu"}, {"depth", 3}};
  int resampled = 0;
  for (uint64_t s = 0; s < 200; ++s) {
    SplitMix64 rng(s);
    const Json child = perturb_hparams(config.hyperparameters, config.searcher, parent, rng);
    CHECK(child["x"].get<double>() == doctest::Approx(0.8));
    CHECK(child["width"].get<int64_t>() <= 64);  // 60 * 1.2 = 72, kept in range
    if (child["act"] != "relu") ++resampled;
  }
  CHECK(resampled > 100);  // resampled every time: two thirds of draws differ
  config.searcher.perturbations["x"] = {{3.0}, 0.0};
  SplitMix64 rng(1);
  CHECK(perturb_hparams(config.hyperparameters, config.searcher, parent, rng)["x"].get<double>() <
        1.0);  // the top of [0.1, 1.0) is not reached
}

}  // namespace cairn
