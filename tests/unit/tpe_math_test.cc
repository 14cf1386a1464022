// TPE's arithmetic on cases small enough to check by hand: the truncated normal helpers,
// the Parzen estimators' components, bandwidths and densities, the observation weights,
// the good/bad split, and that the candidate taken is the one with the highest l(x)/g(x).
// The expected densities were worked out by hand and agree with Optuna 3.1's
// _ParzenEstimator on the same observations to the digits written — for continuous ranges
// once its truncated normal density has the 1/σ that Optuna 3.1 to 3.4 left out (fixed in
// 3.5; docs/search.md, "TPE").
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "engine/search/parzen_estimator.h"
#include "engine/search/tpe_sampler.h"
#include "engine/search/truncated_normal.h"
#include "searcher_simulation.h"

namespace cairn {
namespace {

using doctest::Approx;

double phi(double z) {  // Φ, for the hand computations
  return 0.5 * std::erfc(-z / std::numbers::sqrt2);
}

}  // namespace

TEST_CASE("tpe math: the normal distribution's log cdf, quantile and truncated masses") {
  CHECK(normal_log_cdf(0) == Approx(std::log(0.5)).epsilon(1e-15));
  CHECK(normal_log_cdf(3) == Approx(-0.001350809964748193).epsilon(1e-12));
  CHECK(normal_log_cdf(-25) == Approx(-316.63940800802027).epsilon(1e-13));
  // Far past where Φ itself underflows: the asymptotic series.
  CHECK(normal_log_cdf(-40) == Approx(-804.6084420137539).epsilon(1e-13));
  CHECK(std::isfinite(normal_log_cdf(-1e5)));

  CHECK(normal_quantile(0.975) == Approx(1.959963984540054).epsilon(1e-13));
  CHECK(normal_quantile(0.3) == Approx(-0.5244005127080409).epsilon(1e-13));
  CHECK(normal_quantile(1e-10) == Approx(-6.361340902404056).epsilon(1e-13));
  CHECK(normal_quantile(0) == -HUGE_VAL);
  CHECK(normal_quantile(1) == HUGE_VAL);

  CHECK(normal_log_mass(-1, 1) == Approx(-0.38171514630212616).epsilon(1e-14));
  // Both ends 40σ out: Φ(41) − Φ(40) is 1 − 1 in doubles, but not in logs.
  CHECK(normal_log_mass(40, 41) == Approx(-804.6084420137539).epsilon(1e-13));
  CHECK(normal_log_mass(-41, -40) == Approx(-804.6084420137539).epsilon(1e-13));
  CHECK(normal_log_mass(1, 1) == -HUGE_VAL);

  // Inversion: quantile u of N(0,1) truncated to [-2, 1].
  CHECK(truncated_normal_at(-2, 1, 0.5) ==
        Approx(normal_quantile(phi(-2) + 0.5 * (phi(1) - phi(-2)))).epsilon(1e-13));
  CHECK(truncated_normal_at(-2, 1, 0.5) == Approx(-0.17116391801782482).epsilon(1e-12));
  CHECK(truncated_normal_at(-2, 1, 0) == Approx(-2));
  // In a far tail the draw still lands inside, and in order.
  double previous = 40;
  for (double u : {0.0, 0.1, 0.5, 0.9, 0.999}) {
    const double z = truncated_normal_at(40, 41, u);
    CHECK(z >= 40);
    CHECK(z <= 41);
    CHECK(z >= previous);
    previous = z;
  }
  CHECK(truncated_normal_log_pdf(0, -1, 1) ==
        Approx(-0.5 * std::log(2 * std::numbers::pi) + 0.38171514630212616).epsilon(1e-14));
  CHECK(truncated_normal_log_pdf(2, -1, 1) == -HUGE_VAL);
}

TEST_CASE("tpe math: observation weights ramp the oldest down past 25 (Optuna's default)") {
  CHECK(tpe_observation_weights(0).empty());
  CHECK(tpe_observation_weights(3) == std::vector<double>{1, 1, 1});
  CHECK(tpe_observation_weights(25) == std::vector<double>(25, 1.0));
  const std::vector<double> w = tpe_observation_weights(30);
  REQUIRE(w.size() == 30);
  // linspace(1/30, 1, 5), then 25 ones.
  const double ramp[] = {1.0 / 30, 0.275, 0.5166666666666667, 0.7583333333333333, 1.0};
  for (int i = 0; i < 5; ++i) CHECK(w[i] == Approx(ramp[i]).epsilon(1e-15));
  for (int i = 5; i < 30; ++i) CHECK(w[i] == 1.0);
  CHECK(tpe_observation_weights(26) == [] {
    std::vector<double> v(26, 1.0);
    v[0] = 1.0 / 26;
    return v;
  }());
}

TEST_CASE("tpe math: the good share is min(ceil(gamma n), max_good)") {
  TpeConfig settings;
  CHECK(TpeSampler::good_count(1, settings) == 1);
  CHECK(TpeSampler::good_count(10, settings) == 1);
  CHECK(TpeSampler::good_count(11, settings) == 2);
  CHECK(TpeSampler::good_count(30, settings) == 3);
  CHECK(TpeSampler::good_count(250, settings) == 25);
  CHECK(TpeSampler::good_count(300, settings) == 25);
  settings.gamma = 0.25;
  settings.max_good = 4;
  CHECK(TpeSampler::good_count(9, settings) == 3);
  CHECK(TpeSampler::good_count(100, settings) == 4);
}

TEST_CASE("tpe math: a continuous estimator's components, bandwidths and density") {
  // Observations 0.2 and 0.9 in [0, 1]; the prior N(0.5, 1) comes last. Sorted with the
  // ends: 0 | 0.2 0.5 0.9 | 1. Each bandwidth is the larger gap to a neighbour, the outermost
  // looking inward only: 0.2 → 0.3, 0.9 → 0.4; the magic clip's floor 1 / min(100, 3 + 1)
  // = 0.25 leaves them; the prior is the whole range.
  const NumericalParzen pe({0.2, 0.9}, 0, 1, 0, ParzenSettings{});
  CHECK(pe.mus() == std::vector<double>{0.2, 0.9, 0.5});
  REQUIRE(pe.sigmas().size() == 3);
  CHECK(pe.sigmas()[0] == Approx(0.3));
  CHECK(pe.sigmas()[1] == Approx(0.4));
  CHECK(pe.sigmas()[2] == 1);
  CHECK(pe.weights() == std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3});
  // p(x) = Σ ⅓ · φ((x − μ)/σ) / σ / (Φ((1 − μ)/σ) − Φ(−μ/σ)).
  auto by_hand = [&](double x) {
    double p = 0;
    for (size_t i = 0; i < 3; ++i) {
      const double mu = pe.mus()[i], sigma = pe.sigmas()[i];
      const double z = (x - mu) / sigma;
      p += std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi) / sigma /
           (phi((1 - mu) / sigma) - phi(-mu / sigma)) / 3;
    }
    return std::log(p);
  };
  const std::pair<double, double> optuna[] = {{0.0, -0.18771697024952982},
                                              {0.1, -0.039643438534401776},
                                              {0.5, 0.05127853158580509},
                                              {0.95, -0.10261834951899629},
                                              {1.0, -0.1359178605830701}};
  for (const auto& [x, expected] : optuna) {
    CAPTURE(x);
    CHECK(pe.log_pdf(x) == Approx(by_hand(x)).epsilon(1e-12));
    CHECK(pe.log_pdf(x) == Approx(expected).epsilon(1e-12));
  }
  CHECK(pe.log_pdf(1.5) == -HUGE_VAL);

  // Forty observations: the floor is 1 / min(100, 41 + 1), the ceiling the range.
  std::vector<double> many;
  for (int i = 0; i < 40; ++i) many.push_back(std::pow(0.01 + 0.98 * i / 39.0, 2));
  const NumericalParzen dense(many, 0, 1, 0, ParzenSettings{});
  CHECK(*std::min_element(dense.sigmas().begin(), dense.sigmas().end()) == Approx(1.0 / 42));
  CHECK(dense.log_pdf(0.3) == Approx(0.10218911094730188).epsilon(1e-12));
}

TEST_CASE("tpe math: an int estimator gives each integer the mass within ±1/2 of it") {
  // One observation, 2, in [1, 3]: the estimator spans [0.5, 3.5] and its prior N(2, 3) sits
  // on the observation. Both bandwidths look inward to a gap of 0, so the clip's floor
  // 3 / min(100, 3) = 1 applies to the observation.
  const NumericalParzen pe({2}, 1, 3, 1, ParzenSettings{});
  CHECK(pe.sigmas() == std::vector<double>{1, 3});
  // p(2) = ½ (Φ(½) − Φ(−½)) / (Φ(1.5) − Φ(−1.5)) + ½ (Φ(⅙) − Φ(−⅙)) / (Φ(½) − Φ(−½)).
  const double p2 = 0.5 * (phi(0.5) - phi(-0.5)) / (phi(1.5) - phi(-1.5)) +
                    0.5 * (phi(1.0 / 6) - phi(-1.0 / 6)) / (phi(0.5) - phi(-0.5));
  CHECK(std::exp(pe.log_pdf(2)) == Approx(p2).epsilon(1e-12));
  CHECK(pe.log_pdf(2) == Approx(-0.9318422450957351).epsilon(1e-12));
  CHECK(pe.log_pdf(1) == Approx(-1.1937378850182971).epsilon(1e-12));
  CHECK(pe.log_pdf(3) == Approx(pe.log_pdf(1)).epsilon(1e-14));
  CHECK(std::exp(pe.log_pdf(1)) + std::exp(pe.log_pdf(2)) + std::exp(pe.log_pdf(3)) ==
        Approx(1.0).epsilon(1e-12));

  // Observations 1, 7, 9, 10 in [1, 10]: the prior 5.5 sorts between them; 1 looks inward
  // (4.5), 7 and 9 take their larger gap (2), 10 looks inward (1) and is raised to the floor
  // 10 / min(100, 6).
  const NumericalParzen four({1, 7, 9, 10}, 1, 10, 1, ParzenSettings{});
  const double expected[] = {4.5, 2, 2, 10.0 / 6, 10};
  for (int i = 0; i < 5; ++i) CHECK(four.sigmas()[i] == Approx(expected[i]));
  CHECK(four.log_pdf(1) == Approx(-2.938787641150001).epsilon(1e-12));
  CHECK(four.log_pdf(5) == Approx(-2.5659370045853254).epsilon(1e-12));
  CHECK(four.log_pdf(10) == Approx(-1.8414960204145037).epsilon(1e-12));
  double total = 0;
  for (int x = 1; x <= 10; ++x) total += std::exp(four.log_pdf(x));
  CHECK(total == Approx(1.0).epsilon(1e-12));
  // Draws are integers of the range.
  SplitMix64 rng(7);
  for (int i = 0; i < 200; ++i) {
    const double x = four.sample(rng);
    CHECK(x == std::round(x));
    CHECK(x >= 1);
    CHECK(x <= 10);
  }
}

TEST_CASE("tpe math: a categorical estimator adds each observation to a uniform floor") {
  // Observations a, a, c of {a, b, c}: each observation's component is (¼, ¼, ¼) plus 1 on
  // its value, normalized by 1.75; the prior is uniform; the four weigh ¼ each.
  // p(a) = ¼ (2 · 1.25/1.75 + 0.25/1.75 + ⅓) = 10/21, p(b) = 4/21, p(c) = 7/21.
  const CategoricalParzen pe({0, 0, 2}, 3, ParzenSettings{});
  CHECK(std::exp(pe.log_pdf(0)) == Approx(10.0 / 21).epsilon(1e-14));
  CHECK(std::exp(pe.log_pdf(1)) == Approx(4.0 / 21).epsilon(1e-14));
  CHECK(std::exp(pe.log_pdf(2)) == Approx(7.0 / 21).epsilon(1e-14));
  CHECK(pe.log_pdf(0) == Approx(-0.7419373447293773).epsilon(1e-13));
  // Drawing follows the density.
  SplitMix64 rng(11);
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 21000; ++i) ++counts[pe.sample(rng)];
  CHECK(counts[0] == doctest::Approx(10000).epsilon(0.05));
  CHECK(counts[1] == doctest::Approx(4000).epsilon(0.08));
  CHECK(counts[2] == doctest::Approx(7000).epsilon(0.05));
}

TEST_CASE("tpe math: a log range is modelled on its exponent") {
  // 1e-3, 1e-2, 3e-2 in [1e-4, 1e-1): exponents −3, −2, −1.52; prior −2.5 with σ 3; the
  // neighbours' gaps are below the floor 3 / min(100, 5) = 0.6.
  const NumericalParzen pe({-3, -2, std::log10(3e-2)}, -4, -1, 0, ParzenSettings{});
  for (int i = 0; i < 3; ++i) CHECK(pe.sigmas()[i] == Approx(0.6));
  CHECK(pe.mus()[3] == -2.5);
  CHECK(pe.sigmas()[3] == 3);
}

TEST_CASE("tpe: the value taken is, of the candidates drawn from l, the one with the best l/g") {
  const ExperimentConfig cfg = testing::searcher_config(R"(
entrypoint: python3 train.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
searcher: {name: tpe, metric: loss, max_length: 1, max_trials: 30}
)");
  const TpeSampler tpe(cfg.hyperparameters, cfg.searcher.tpe);
  CHECK(tpe.dimensions() == 1);
  // 20 observations: x = 0.05, 0.10, … 1.0, loss |x − 0.2|: with gamma 0.1 the good ones are
  // x = 0.2 (trial 4) and the older of 0.15 and 0.25, 0.15 (trial 3).
  std::vector<TpeObservation> observations;
  std::vector<double> good_x, bad_x;
  for (int i = 1; i <= 20; ++i) {
    const double x = 0.05 * i;
    observations.push_back({i, Json{{"x", x}}, std::fabs(x - 0.2)});
    (i == 3 || i == 4 ? good_x : bad_x).push_back(x);
  }
  SplitMix64 rng(42);
  SplitMix64 replay = rng;
  const Json chosen = tpe.sample(observations, rng);
  // The same draws by hand: 24 candidates from l, scored by log l − log g.
  const NumericalParzen l(good_x, 0, 1, 0, ParzenSettings{});
  const NumericalParzen g(bad_x, 0, 1, 0, ParzenSettings{});
  double best = 0, best_score = -HUGE_VAL;
  for (int i = 0; i < 24; ++i) {
    const double x = l.sample(replay);
    const double score = l.log_pdf(x) - g.log_pdf(x);
    if (i == 0 || score > best_score) {
      best = x;
      best_score = score;
    }
  }
  CHECK(chosen["x"].get<double>() == Approx(best).epsilon(1e-15));
  CHECK(std::fabs(best - 0.175) < 0.1);  // near the good ones
  // The order observations arrive in does not matter; the generator's state does.
  std::reverse(observations.begin(), observations.end());
  SplitMix64 again(42);
  CHECK(tpe.sample(observations, again) == chosen);
}

TEST_CASE("tpe: categorical, int, log and nested hyperparameters follow the good trials") {
  const ExperimentConfig cfg = testing::searcher_config(R"(
entrypoint: python3 train.py
hyperparameters:
  opt: {type: categorical, vals: [sgd, adam, rmsprop]}
  arch:
    depth: {type: int, minval: 1, maxval: 9}
    kind: mlp
  lr: {type: log, minval: -5, maxval: -1}
searcher: {name: tpe, metric: loss, max_length: 1, max_trials: 30}
)");
  const TpeSampler tpe(cfg.hyperparameters, cfg.searcher.tpe);
  CHECK(tpe.dimensions() == 3);  // arch.kind is a constant
  // Good: adam, depth 7, lr 1e-2; the rest spread everywhere else.
  std::vector<TpeObservation> observations;
  const char* opts[] = {"sgd", "rmsprop"};
  for (int i = 1; i <= 30; ++i) {
    const bool good = i % 10 == 0;
    Json h{{"opt", good ? "adam" : opts[i % 2]},
           {"arch", {{"depth", good ? 7 : 1 + (i % 4)}, {"kind", "mlp"}}},
           {"lr", good ? 1e-2 : std::pow(10.0, -5 + 4.0 * (i % 7) / 6 * (i % 3 == 0 ? 0.2 : 1))}};
    observations.push_back({i, h, good ? 0.0 : 1.0});
  }
  int adam = 0, deep = 0, near_lr = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SplitMix64 rng(seed);
    const Json h = tpe.sample(observations, rng);
    CHECK(h["arch"]["kind"] == "mlp");
    const int64_t depth = h["arch"]["depth"].get<int64_t>();
    CHECK(depth >= 1);
    CHECK(depth <= 9);
    const double lr = h["lr"].get<double>();
    CHECK(lr >= 1e-5);
    CHECK(lr < 1e-1);
    adam += h["opt"] == "adam";
    deep += depth >= 6 && depth <= 8;
    near_lr += std::fabs(std::log10(lr) + 2) < 0.5;
  }
  CHECK(adam >= 18);
  CHECK(deep >= 18);
  CHECK(near_lr >= 15);
}

}  // namespace cairn
