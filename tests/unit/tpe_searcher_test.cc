// TPE inside the searchers, driven by instant trials: the startup trials are random
// search's, TPE then finds better configurations than random search on a synthetic
// objective (and BOHB better than Hyperband), BOHB fits its model on the longest rung with
// 2 (d + 1) results and draws a third of its trials at random, a searcher rebuilt from its log at
// any point decides exactly as the original, and the config keys are read and refused as the others
// are.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "engine/search/searcher_factory.h"
#include "searcher_simulation.h"

namespace cairn {
namespace {

using testing::InstantTrials;

// Five searched hyperparameters of every type, one nested, and a constant.
constexpr const char* kSpace = R"(
entrypoint: python3 train.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
  n: {type: int, minval: 1, maxval: 100}
  lr: {type: log, minval: -5, maxval: -1}
  opt: {type: categorical, vals: [sgd, adam, rmsprop, adagrad]}
  arch:
    depth: {type: int, minval: 1, maxval: 8}
    kind: mlp
)";

ExperimentConfig config_for(const std::string& searcher) {
  return testing::searcher_config(std::string(kSpace) + "searcher: {metric: loss, " + searcher +
                                  "}\n");
}

std::unique_ptr<Searcher> make(const ExperimentConfig& cfg, uint64_t seed, int concurrency) {
  auto searcher = make_searcher(cfg, seed, concurrency);
  REQUIRE_MESSAGE(searcher.ok(), searcher.status().message());
  return std::move(*searcher);
}

// The synthetic objective: a smooth bowl with its minimum 0 at x = 0.71, n = 37, lr = 10^-2.6,
// opt = adam, depth = 5. Training longer lowers it by 1/length, the same for everyone.
double objective(const Json& h) {
  const double x = h["x"].get<double>() - 0.71;
  const double n = (h["n"].get<double>() - 37) / 100;
  const double lr = (std::log10(h["lr"].get<double>()) + 2.6) / 4;
  const double opt = h["opt"] == "adam" ? 0 : h["opt"] == "rmsprop" ? 0.05 : 0.15;
  const double depth = (h["arch"]["depth"].get<double>() - 5) / 8;
  return x * x + n * n + lr * lr + opt + depth * depth;
}

double loss_of(const Json& h, int64_t length) {
  return objective(h) + 1.0 / static_cast<double>(length);
}

// The best objective among trials that reached `max_length`.
double best_final(const InstantTrials& sim, int64_t max_length) {
  double best = HUGE_VAL;
  for (const auto& [trial, vals] : sim.validations)
    if (vals.back().first == max_length) best = std::min(best, objective(sim.hparams.at(trial)));
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Every cut of the logged calls: the rebuilt searcher answers the rest exactly as the
// original did, and ends in the same state.
void check_replay_at_every_cut(const ExperimentConfig& cfg, int concurrency) {
  auto original = make(cfg, 77, concurrency);
  InstantTrials sim(*original, concurrency, loss_of);
  sim.fails = [](int64_t trial, int64_t length) { return trial % 9 == 4 && length > 1; };
  sim.run();
  REQUIRE(original->finished());
  const size_t n = sim.calls.size();
  for (size_t cut = 0; cut <= n; ++cut) {
    CAPTURE(cut);
    auto rebuilt = make(cfg, 77, concurrency);
    REQUIRE(testing::describe_actions(rebuilt->start()) == sim.answers[0]);
    for (size_t i = 0; i < cut; ++i) deliver(*rebuilt, sim.calls[i]);  // answers discarded
    for (size_t i = cut; i < n; ++i)
      REQUIRE(testing::describe_actions(deliver(*rebuilt, sim.calls[i])) == sim.answers[i + 1]);
    REQUIRE(rebuilt->finished());
    REQUIRE(rebuilt->describe() == original->describe());
  }
}

}  // namespace

TEST_CASE("tpe: the startup trials are random search's, the rest come from the model") {
  const ExperimentConfig tpe = config_for("name: tpe, max_length: 1, max_trials: 30");
  const ExperimentConfig random = config_for("name: random, max_length: 1, max_trials: 30");
  CHECK(tpe.searcher.name == "random");
  CHECK(tpe.searcher.sampler == "tpe");
  auto a = make(tpe, 5, 1);
  auto b = make(random, 5, 1);
  InstantTrials with_tpe(*a, 1, loss_of), plain(*b, 1, loss_of);
  with_tpe.run();
  plain.run();
  for (int64_t trial = 1; trial <= 30; ++trial) {
    CAPTURE(trial);
    CHECK(with_tpe.seeds.at(trial) == plain.seeds.at(trial));  // seeds never change
    if (trial <= 10)
      CHECK(with_tpe.hparams.at(trial) == plain.hparams.at(trial));
    else
      CHECK(with_tpe.hparams.at(trial) != plain.hparams.at(trial));
  }
  const Json view = a->describe();
  CHECK(view["searcher"] == "random");
  CHECK(view["sampler"] == "tpe");
  CHECK(view["tpe"]["random_trials"] == 10);
  CHECK(view["tpe"]["model_trials"] == 20);
  // Trial 30 was created when trials 1–29 had completed.
  CHECK(view["tpe"]["last_model"] == Json{{"trial", 30}, {"length", 1}, {"observations", 29}});
  CHECK(b->describe()["sampler"] == "random");
  CHECK_FALSE(b->describe().contains("tpe"));

  // n_startup_trials moves the switch; the trials before it stay random search's.
  auto late = make(config_for("name: tpe, max_length: 1, max_trials: 30, "
                              "tpe: {n_startup_trials: 25}"),
                   5, 1);
  InstantTrials later(*late, 1, loss_of);
  later.run();
  for (int64_t trial = 1; trial <= 25; ++trial)
    CHECK(later.hparams.at(trial) == plain.hparams.at(trial));
  CHECK(late->describe()["tpe"]["model_trials"] == 5);
}

TEST_CASE("tpe finds better configurations than random search with the same trials") {
  // Paired seeds, 60 trials each, one at a time: what TPE adds is the model.
  std::vector<double> tpe_best, random_best;
  int tpe_wins = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    CAPTURE(seed);
    auto tpe = make(config_for("name: tpe, max_length: 1, max_trials: 60"), seed, 1);
    auto random = make(config_for("name: random, max_length: 1, max_trials: 60"), seed, 1);
    InstantTrials a(*tpe, 1, loss_of), b(*random, 1, loss_of);
    a.run();
    b.run();
    tpe_best.push_back(best_final(a, 1));
    random_best.push_back(best_final(b, 1));
    tpe_wins += tpe_best.back() < random_best.back();
  }
  MESSAGE("best objective, tpe vs random, seeds 1-5: median " << median(tpe_best) << " vs "
                                                              << median(random_best));
  CHECK(tpe_wins >= 4);
  CHECK(median(tpe_best) < 0.5 * median(random_best));
}

TEST_CASE("bohb (hyperband with tpe) finds better configurations than hyperband") {
  // 20 paired seeds: the margin per seed is small against the spread of one search's best
  // (each side wins some), so 5 seeds said little. 14 of 20 or more happens by chance with
  // probability 0.058 when neither is better. (Recorded: 15 of 20, median 0.068 against
  // 0.107. Seeds 1-5 alone gave 2 of 5 once the categorical draw became HpBandSter's; seeds
  // 1-40: 30 of 40.)
  std::vector<double> bohb_best, hb_best;
  int bohb_wins = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    auto bohb = make(config_for("name: hyperband, max_length: 27, sampler: tpe"), seed, 1);
    auto hb = make(config_for("name: hyperband, max_length: 27"), seed, 1);
    InstantTrials a(*bohb, 1, loss_of), b(*hb, 1, loss_of);
    a.run();
    b.run();
    CHECK(a.units == b.units);  // the same budget: only the hyperparameters differ
    bohb_best.push_back(best_final(a, 27));
    hb_best.push_back(best_final(b, 27));
    bohb_wins += bohb_best.back() < hb_best.back();
  }
  MESSAGE("best objective at max_length, bohb vs hyperband, seeds 1-20: median "
          << median(bohb_best) << " vs " << median(hb_best) << ", bohb better on " << bohb_wins);
  CHECK(bohb_wins >= 14);
  CHECK(median(bohb_best) < median(hb_best));
}

TEST_CASE("bohb fits its model on the longest rung with 2 (d + 1) results, d + 1 of them good") {
  for (const char* searcher :
       {"name: hyperband, max_length: 27, sampler: tpe",
        "name: asha, max_length: 27, max_rungs: 4, max_trials: 60, sampler: tpe"}) {
    for (int concurrency : {1, 4}) {
      CAPTURE(std::string(searcher));
      CAPTURE(concurrency);
      const ExperimentConfig cfg = config_for(searcher);
      auto original = make(cfg, 3, concurrency);
      InstantTrials sim(*original, concurrency, loss_of);
      sim.run();
      // Walk the calls again, keeping the results per length, and check each trial created
      // against the rule at that moment. d = 5, so N_min = 6 and a length needs 12 results.
      auto rebuilt = make(cfg, 3, concurrency);
      rebuilt->start();
      std::map<int64_t, int64_t> per_length;
      std::set<int64_t> validated;
      int64_t model_trials = 0, eligible = 0, before_rule = 0;
      for (const testing::SearcherCall& call : sim.calls) {
        // The call's own validation is a result before any trial it leads to.
        if (call.validation) {
          ++per_length[call.length];
          validated.insert(call.trial);
        }
        std::optional<std::pair<int64_t, int64_t>> rule;  // (length, results)
        if (validated.size() >= 10)
          for (auto it = per_length.rbegin(); it != per_length.rend() && !rule; ++it)
            if (it->second >= 12) rule = std::make_pair(it->first, it->second);
        const std::vector<SearcherAction> actions = deliver(*rebuilt, call);
        const Json view = rebuilt->describe();
        int64_t created = 0;
        for (const SearcherAction& a : actions)
          created += a.kind == SearcherAction::Kind::kCreateTrial;
        if (created == 0) continue;
        const int64_t from_model = view["tpe"]["model_trials"].get<int64_t>() - model_trials;
        model_trials += from_model;
        if (!rule) {
          before_rule += created;
          CHECK(from_model == 0);  // no length has enough results: random search's trials
          continue;
        }
        eligible += created;
        if (from_model > 0) {  // the last of them came from the model fitted on the rule's length
          CHECK(view["tpe"]["last_model"]["length"] == rule->first);
          CHECK(view["tpe"]["last_model"]["observations"] == rule->second);
        }
      }
      CHECK(original->describe()["tpe"]["model_trials"] == model_trials);
      CHECK(before_rule > 0);
      // BOHB's random fraction: about a third of the trials the model could have made are
      // drawn at random.
      CAPTURE(model_trials);
      CAPTURE(eligible);
      CHECK(model_trials > 0);
      CHECK(model_trials < eligible);
      CHECK(std::abs(static_cast<double>(eligible - model_trials) / eligible - 1.0 / 3) < 0.2);
      CHECK(original->describe()["sampler"] == "tpe");
    }
  }
}

TEST_CASE("bohb: a trial that errors out on its way to a rung is a +inf result there") {
  // HpBandSter's new_result: a run without a result counts as a loss of +inf at its budget,
  // so it is one of the bad results. Every fourth trial errors out on its way to length 1; the
  // model's count of results at a length includes them.
  const ExperimentConfig cfg = config_for(
      "name: asha, max_length: 9, max_rungs: 3, max_trials: 60, sampler: tpe, "
      "tpe: {n_startup_trials: 0}");
  auto original = make(cfg, 5, 1);
  InstantTrials sim(*original, 1, loss_of);
  sim.fails = [](int64_t trial, int64_t length) { return trial % 4 == 0 && length == 1; };
  sim.run();
  REQUIRE(sim.errored.size() >= 10);
  auto rebuilt = make(cfg, 5, 1);
  rebuilt->start();
  std::map<int64_t, int64_t> per_length;
  std::set<int64_t> counted;
  int64_t fits = 0, model_trials = 0;
  for (const testing::SearcherCall& call : sim.calls) {
    if (call.validation)
      ++per_length[call.length];
    else if (sim.errored.count(call.trial) && counted.insert(call.trial).second)
      ++per_length[1];
    deliver(*rebuilt, call);
    const Json view = rebuilt->describe();
    if (view["tpe"]["model_trials"].get<int64_t>() == model_trials) continue;
    model_trials = view["tpe"]["model_trials"].get<int64_t>();
    const int64_t length = view["tpe"]["last_model"]["length"].get<int64_t>();
    CHECK(view["tpe"]["last_model"]["observations"] == per_length[length]);
    fits += length == 1;
  }
  CHECK(fits > 0);
}

TEST_CASE("bohb: a trial drawn at random is random search's trial with that index") {
  // Trials the coin sends to random sampling get exactly what sampler: random gives trial k,
  // so a BOHB search shares its random trials with a plain one of the same seed.
  const ExperimentConfig bohb = config_for("name: hyperband, max_length: 27, sampler: tpe");
  const ExperimentConfig plain = config_for("name: hyperband, max_length: 27");
  auto a = make(bohb, 9, 1);
  auto b = make(plain, 9, 1);
  InstantTrials with_tpe(*a, 1, loss_of), random(*b, 1, loss_of);
  with_tpe.run();
  random.run();
  const Json view = a->describe();
  const int64_t total =
      view["tpe"]["model_trials"].get<int64_t>() + view["tpe"]["random_trials"].get<int64_t>();
  REQUIRE(total == static_cast<int64_t>(with_tpe.hparams.size()));
  int64_t same = 0;
  for (const auto& [trial, hparams] : with_tpe.hparams)
    same += random.hparams.count(trial) && random.hparams.at(trial) == hparams;
  CHECK(same == view["tpe"]["random_trials"].get<int64_t>());  // and none from the model
}

TEST_CASE("tpe: a searcher rebuilt from its log at any point decides exactly as the original") {
  const char* searchers[] = {
      "name: tpe, max_length: 3, max_trials: 24",
      "name: hyperband, max_length: 9, sampler: tpe, tpe: {n_startup_trials: 4}",
      "name: asha, max_length: 9, max_rungs: 3, max_trials: 24, sampler: tpe, "
      "tpe: {n_startup_trials: 5}",
  };
  for (const char* searcher : searchers) {
    for (int concurrency : {1, 3}) {
      CAPTURE(std::string(searcher));
      CAPTURE(concurrency);
      check_replay_at_every_cut(config_for(searcher), concurrency);
    }
  }
}

TEST_CASE("tpe: with one trial at a time, the same config and seed create the same trials") {
  for (const char* searcher :
       {"name: tpe, max_length: 3, max_trials: 20",
        "name: asha, max_length: 9, max_rungs: 3, max_trials: 30, sampler: tpe"}) {
    CAPTURE(std::string(searcher));
    const ExperimentConfig cfg = config_for(searcher);
    auto a = make(cfg, 9, 1), b = make(cfg, 9, 1), c = make(cfg, 10, 1);
    InstantTrials sa(*a, 1, loss_of), sb(*b, 1, loss_of), sc(*c, 1, loss_of);
    sa.run();
    sb.run();
    sc.run();
    CHECK(sa.hparams == sb.hparams);
    CHECK(sa.hparams != sc.hparams);
  }
}

TEST_CASE("tpe: missing and infinite metrics are the worst observations; the search finishes") {
  // 30 asha trials: BOHB's model needs 2 (d + 1) = 12 results at a rung.
  for (const char* searcher : {"name: tpe, max_length: 2, max_trials: 30",
                               "name: asha, max_length: 9, max_rungs: 3, max_trials: 30, "
                               "sampler: tpe, tpe: {n_startup_trials: 2}"}) {
    for (double bad : {HUGE_VAL, double{NAN}}) {
      CAPTURE(std::string(searcher));
      CAPTURE(bad);
      auto s = make(config_for(searcher), 4, 2);
      InstantTrials sim(*s, 2, [bad](const Json& h, int64_t length) {
        return h["opt"] == "sgd" ? bad : loss_of(h, length);
      });
      sim.run();
      CHECK(s->finished());
      CHECK(sim.closed.size() == 30);
      CHECK(s->describe()["tpe"]["model_trials"].get<int64_t>() > 0);
    }
  }
}

TEST_CASE("tpe config: defaults, the shorthand, settings, and mistakes named by file, line, key") {
  const ExperimentConfig plain = config_for("name: asha, max_length: 9, max_trials: 9");
  CHECK(plain.searcher.sampler == "random");
  CHECK(plain.searcher.tpe.n_startup_trials == 10);
  CHECK(plain.searcher.tpe.n_ei_candidates == 24);
  CHECK(plain.searcher.tpe.gamma == 0.1);
  CHECK(plain.searcher.tpe.max_good == 25);
  CHECK(plain.searcher.tpe.prior_weight == 1.0);
  CHECK_FALSE(plain.searcher.tpe.consider_endpoints);
  CHECK(plain.searcher.tpe.consider_magic_clip);
  const ExperimentConfig set = config_for(
      "name: hyperband, max_length: 9, sampler: tpe, tpe: {n_startup_trials: 0, "
      "n_ei_candidates: 64, gamma: 0.25, max_good: 10, prior_weight: 2.5, consider_endpoints: "
      "true, consider_magic_clip: false}");
  CHECK(set.searcher.name == "hyperband");
  CHECK(set.searcher.sampler == "tpe");
  CHECK(set.searcher.tpe.n_startup_trials == 0);
  CHECK(set.searcher.tpe.n_ei_candidates == 64);
  CHECK(set.searcher.tpe.gamma == 0.25);
  CHECK(set.searcher.tpe.max_good == 10);
  CHECK(set.searcher.tpe.prior_weight == 2.5);
  CHECK(set.searcher.tpe.consider_endpoints);
  CHECK_FALSE(set.searcher.tpe.consider_magic_clip);
  // Like every searcher key, tpe settings are accepted (and unused) with random sampling.
  CHECK(config_for("name: random, max_length: 1, max_trials: 2, tpe: {gamma: 0.5}")
            .searcher.sampler == "random");

  const std::pair<std::string, std::string> bad[] = {
      {"name: asha, max_length: 9, max_trials: 9, sampler: bayes",
       "exp.yaml:11: searcher.sampler: must be one of random, tpe, got 'bayes'"},
      {"name: tpe, max_length: 1, max_trials: 2, sampler: random",
       "exp.yaml:11: searcher.sampler: is random, but searcher.name tpe means"},
      {"name: grid, max_length: 1, sampler: tpe",
       "exp.yaml:11: searcher.sampler: tpe draws hyperparameters for random, hyperband and asha; "
       "the grid searcher draws none"},
      {"name: single, max_length: 1, sampler: tpe", "exp.yaml:11: searcher.sampler: tpe draws"},
      {"name: pbt, max_length: 9, population_size: 4, perturbation_interval: 3, sampler: tpe",
       "exp.yaml:11: searcher.sampler: tpe draws hyperparameters for random, hyperband and asha; "
       "the pbt searcher perturbs its population's instead"},
      {"name: tpe, max_length: 1", "searcher.max_trials: is required"},
      {"name: tpe, max_length: 1, max_trials: 2, tpe: {gamma: 0}",
       "exp.yaml:11: searcher.tpe.gamma: must be greater than 0 and at most 1, got 0"},
      {"name: tpe, max_length: 1, max_trials: 2, tpe: {gamma: 1.5}",
       "exp.yaml:11: searcher.tpe.gamma: must be greater than 0 and at most 1, got 1.5"},
      {"name: tpe, max_length: 1, max_trials: 2, tpe: {n_ei_candidates: 0}",
       "exp.yaml:11: searcher.tpe.n_ei_candidates: must be at least 1, got 0"},
      {"name: tpe, max_length: 1, max_trials: 2, tpe: {n_startup_trials: -1}",
       "exp.yaml:11: searcher.tpe.n_startup_trials: must be at least 0, got -1"},
      {"name: tpe, max_length: 1, max_trials: 2, tpe: {max_good: 0}",
       "exp.yaml:11: searcher.tpe.max_good: must be at least 1, got 0"},
      {"name: tpe, max_length: 1, max_trials: 2, tpe: {prior_weight: -1}",
       "exp.yaml:11: searcher.tpe.prior_weight: must be greater than 0, got -1"},
      {"name: tpe, max_length: 1, max_trials: 2, tpe: {gama: 0.2}",
       "exp.yaml:11: searcher.tpe.gama: unknown key; did you mean 'gamma'?"},
      {"name: tpe, max_length: 1, max_trials: 2, tpe: 3",
       "exp.yaml:11: searcher.tpe: expected a map"},
  };
  for (const auto& [searcher, message] : bad) {
    CAPTURE(std::string(searcher));
    testing::TestDir dir;
    auto cfg = parse_experiment_config(
        std::string(kSpace) + "searcher: {metric: loss, " + searcher + "}\n", "exp.yaml",
        dir.path(), {}, ConfigUse::kNewExperiment);
    REQUIRE_FALSE(cfg.ok());
    CHECK(cfg.status().exit_code() == 2);
    CHECK_MESSAGE(cfg.status().message().find(message) != std::string::npos,
                  cfg.status().message());
  }
}

}  // namespace cairn
