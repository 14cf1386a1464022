// BOHB's model as HpBandSter builds it (bohb_kde.h, bohb_sampler.h): the normal-reference
// bandwidths with their floor and the categorical cap, the product-kernel density (both
// against statsmodels' own numbers), candidates drawn with continuous bandwidths widened
// threefold (categorical ones not, and with the uncapped bandwidth, as HpBandSter draws
// them), HpBandSter's good
// and bad counts (q = 15 %, N_min = d + 1), the proposal being the best of 64 candidates by
// g/l, a joint density that sees what per-hyperparameter estimators cannot, and the defaults.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "engine/search/bohb_kde.h"
#include "engine/search/bohb_sampler.h"

namespace cairn {
namespace {

double spread(const std::vector<double>& xs) {
  double mean = 0, var = 0;
  for (double x : xs) mean += x;
  mean /= static_cast<double>(xs.size());
  for (double x : xs) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(xs.size()));
}

HyperparameterSpec unit_double() {
  HyperparameterSpec spec;
  spec.type = HyperparameterSpec::Type::kDouble;
  spec.minval = 0;
  spec.maxval = 1;
  return spec;
}

TEST_CASE("bohb kde: normal-reference bandwidths, floored at min_bandwidth, categorical capped") {
  // Continuous 0.2, 0.4, 0.6 (σ = sqrt(0.08 / 3)); a constant column; a categorical of 6
  // values at 0, 5, 0 (σ = sqrt(50 / 9), far above its cap 5/6); one of 3 values at 0, 1, 1.
  const BohbKde kde({{0.2, 0.7, 0, 0}, {0.4, 0.7, 5, 1}, {0.6, 0.7, 0, 1}}, {0, 0, 6, 3}, 1e-3);
  const double scale = 1.06 * std::pow(3.0, -1.0 / 8);  // n = 3, d = 4
  REQUIRE(kde.bandwidths().size() == 4);
  CHECK(kde.bandwidths()[0] == doctest::Approx(scale * std::sqrt(0.08 / 3)).epsilon(1e-12));
  CHECK(kde.bandwidths()[1] == 1e-3);
  CHECK(kde.bandwidths()[2] == doctest::Approx(5.0 / 6).epsilon(1e-12));
  CHECK(kde.bandwidths()[3] == doctest::Approx(scale * std::sqrt(2.0 / 9)).epsilon(1e-12));
  const BohbKde wide({{0.5}}, {0}, 0.25);
  CHECK(wide.bandwidths()[0] == 0.25);
}

TEST_CASE("bohb kde: the density is the mean of product kernels, Gaussian and Aitchison-Aitken") {
  const BohbKde kde({{0.3, 0}, {0.8, 2}}, {0, 3}, 1e-3);
  const double h = kde.bandwidths()[0], lambda = kde.bandwidths()[1];
  auto gauss = [h](double x, double m) {
    return std::exp(-0.5 * (x - m) * (x - m) / (h * h)) / (h * std::sqrt(2 * std::numbers::pi));
  };
  for (const BohbPoint& x :
       std::vector<BohbPoint>{{0.3, 0}, {0.5, 1}, {0.75, 2}, {0.0, 0}, {1.0, 2}}) {
    CAPTURE(x[0]);
    CAPTURE(x[1]);
    const double k0 = gauss(x[0], 0.3) * (x[1] == 0 ? 1 - lambda : lambda / 2);
    const double k1 = gauss(x[0], 0.8) * (x[1] == 2 ? 1 - lambda : lambda / 2);
    CHECK(kde.log_pdf(x) == doctest::Approx(std::log((k0 + k1) / 2)).epsilon(1e-9));
  }
  // Far out, where every kernel underflows a double, the order of densities survives.
  const BohbKde narrow({{0.5}}, {0}, 1e-3);
  CHECK(narrow.log_pdf({0.0}) > narrow.log_pdf({1.0}) - 1);  // symmetric: equal
  CHECK(narrow.log_pdf({0.1}) > narrow.log_pdf({0.0}));
  CHECK(std::isfinite(narrow.log_pdf({0.0})));
}

TEST_CASE("bohb kde: candidates widen continuous bandwidths by the factor, not categorical ones") {
  // One continuous point at 0.5 with h = min_bandwidth = 0.01 and a categorical dimension of
  // 4 values whose two points spread it to the uniform cap 3/4.
  const BohbKde kde({{0.5, 0}, {0.5, 3}}, {0, 4}, 0.01);
  REQUIRE(kde.bandwidths()[0] == 0.01);
  REQUIRE(kde.bandwidths()[1] == doctest::Approx(0.75));
  for (double factor : {1.0, 3.0}) {
    CAPTURE(factor);
    SplitMix64 rng(11);
    std::vector<double> xs;
    for (int i = 0; i < 4000; ++i) {
      const BohbPoint p = kde.sample(rng, factor);
      CHECK(p[0] >= 0);
      CHECK(p[0] <= 1);
      xs.push_back(p[0]);
    }
    CHECK(spread(xs) == doctest::Approx(0.01 * factor).epsilon(0.05));
  }
  // The same generator gives the same categorical draws whatever the factor. The two points
  // spread the 4 values so far that statsmodels' bandwidth is 1.06 · 1.5 · 2^(−1/6) ≈ 1.42:
  // the density's is capped at 3/4 (uniform), and HpBandSter's draw, "keep the point's value
  // with 1 − h, else one of the 4 uniformly", never keeps it: every value a quarter of the
  // time (with the capped h it would keep it with 1/4: 5/16 for 0 and 3, 3/16 for 1 and 2).
  REQUIRE(kde.draw_bandwidths()[1] ==
          doctest::Approx(1.06 * 1.5 * std::pow(2.0, -1.0 / 6)).epsilon(1e-12));
  REQUIRE(kde.draw_bandwidths()[0] == kde.bandwidths()[0]);
  SplitMix64 a(5), b(5);
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 4000; ++i) {
    const BohbPoint p = kde.sample(a, 1), q = kde.sample(b, 3);
    CHECK(p[1] == q[1]);
    ++counts[static_cast<size_t>(p[1])];
  }
  for (int c : counts) CHECK(std::abs(c - 1000) < 110);  // σ ≈ 27 each
  // Near an end the truncated draw stays inside [0, 1].
  const BohbKde edge({{0.0}, {0.02}}, {0}, 1e-3);
  SplitMix64 rng(3);
  for (int i = 0; i < 1000; ++i) {
    const double x = edge.sample(rng, 3)[0];
    CHECK(x >= 0);
    CHECK(x <= 1);
  }
}

TEST_CASE(
    "bohb kde: bandwidths and densities are statsmodels' KDEMultivariate's, as HpBandSter's") {
  // Reference values from statsmodels 0.13.5 (Debian's python3-statsmodels), the fit of
  // HpBandSter's config generator (hpbandster/optimizers/config_generators/bohb.py):
  //   kde = sm.nonparametric.KDEMultivariate(data=data, var_type='cucu', bw='normal_reference')
  //   kde.bw = np.clip(kde.bw, 1e-3, None); kde.pdf(x)
  // with data the 10 rows below. Every categorical value occurs in the data and every
  // categorical bandwidth is below its cap, the case where cairn's two departures (c the
  // number of values, the cap) do not apply: the numbers must be statsmodels' exactly.
  const BohbKde kde({{0.12, 0, 0.375, 1},
                     {0.31, 0, 0.625, 0},
                     {0.25, 1, 0.125, 1},
                     {0.77, 0, 0.875, 1},
                     {0.48, 2, 0.375, 0},
                     {0.05, 0, 0.625, 1},
                     {0.66, 1, 0.375, 1},
                     {0.93, 0, 0.125, 0},
                     {0.40, 0, 0.625, 1},
                     {0.58, 1, 0.875, 1}},
                    {0, 3, 0, 2}, 1e-3);
  const std::vector<double> bw{0.21409651980687427, 0.5332269881042635, 0.20362941963175873,
                               0.3642633796123542};
  for (size_t j = 0; j < bw.size(); ++j) {
    CAPTURE(j);
    CHECK(kde.bandwidths()[j] == doctest::Approx(bw[j]).epsilon(1e-13));
    CHECK(kde.draw_bandwidths()[j] == kde.bandwidths()[j]);
  }
  const std::vector<std::pair<BohbPoint, double>> pdf{{{0.3, 0, 0.4, 1}, 0.2582329519445329},
                                                      {{0.9, 2, 0.1, 0}, 0.07529821686542457},
                                                      {{0.0, 1, 1.0, 1}, 0.01819174186311115},
                                                      {{0.5, 0, 0.5, 0}, 0.21328859992106022}};
  for (const auto& [x, p] : pdf) {
    CAPTURE(x[0]);
    CHECK(std::exp(kde.log_pdf(x)) == doctest::Approx(p).epsilon(1e-12));
  }
}

TEST_CASE("bohb kde: a categorical past its cap is drawn as HpBandSter draws it, 1 − h kept") {
  // 8 points on 4 values (3, 1, 1, 3 of them): σ² = 1.75, h = 1.06 · σ · 8^(−1/5) ≈ 0.925,
  // between the density's cap 3/4 and 1. HpBandSter keeps a point's value with 1 − h and else
  // draws one of the 4 uniformly, so value v comes (1 − h) · count(v) / 8 + h / 4 of the time:
  // 0.259 for 0 and 3, 0.241 for 1 and 2 (with the capped h: 0.281 and 0.219).
  const BohbKde kde({{0}, {0}, {0}, {1}, {2}, {3}, {3}, {3}}, {4}, 1e-3);
  const double h = 1.06 * std::sqrt(1.75) * std::pow(8.0, -0.2);
  REQUIRE(kde.bandwidths()[0] == doctest::Approx(0.75));
  REQUIRE(kde.draw_bandwidths()[0] == doctest::Approx(h).epsilon(1e-12));
  SplitMix64 rng(23);
  const int draws = 20000;
  std::vector<int> counts(4, 0);
  for (int i = 0; i < draws; ++i) ++counts[static_cast<size_t>(kde.sample(rng, 3)[0])];
  const std::vector<double> members{3, 1, 1, 3};
  for (size_t v = 0; v < 4; ++v) {
    CAPTURE(v);
    const double p = (1 - h) * members[v] / 8 + h / 4;
    // 4 σ (σ ≈ 62); the capped rule is 7 σ away for every value.
    CHECK(std::abs(counts[v] - draws * p) < 4 * std::sqrt(draws * p * (1 - p)));
  }
}

TEST_CASE("bohb sampler: the settings are HpBandSter's defaults") {
  const BohbSettings settings;
  CHECK(settings.top_n_percent == 15);
  CHECK(settings.num_samples == 64);
  CHECK(settings.random_fraction == 1.0 / 3);
  CHECK(settings.bandwidth_factor == 3);
  CHECK(settings.min_bandwidth == 1e-3);
}

TEST_CASE("bohb sampler: q = 15 % good, N_min = d + 1, the rest bad up to 85 %") {
  const BohbSampler bohb(std::vector<HyperparameterSpec>(7, unit_double()), BohbSettings{});
  CHECK(bohb.min_points() == 8);
  CHECK(bohb.good_count(16) == 8);
  CHECK(bohb.good_count(53) == 8);  // ⌊0.15 · 53⌋ = 7 < N_min
  CHECK(bohb.good_count(60) == 9);  // ⌊0.15 · 60⌋
  CHECK(bohb.good_count(100) == 15);
  CHECK(bohb.bad_count(100) == 85);
  CHECK(bohb.good_count(101) == 15);  // and 85 bad: the worst result is left out
  CHECK(bohb.bad_count(101) == 85);
  CHECK_FALSE(bohb.enough(15));  // 8 good, 7 bad: not more than d = 7
  CHECK(bohb.enough(16));
}

TEST_CASE("bohb sampler: the proposal is the best of 64 candidates from l by g(x)/l(x)") {
  // d = 2; 40 results of random points with a loss that favours the corner (0.8, 0.2).
  const std::vector<HyperparameterSpec> leaves(2, unit_double());
  std::vector<TpeInternalValues> values;
  std::vector<TpePreparedObservation> obs;
  SplitMix64 points(17);
  for (int k = 0; k < 40; ++k) values.push_back({points.uniform(), points.uniform()});
  for (int k = 0; k < 40; ++k) {
    const double x = *values[k][0] - 0.8, y = *values[k][1] - 0.2;
    obs.push_back({k + 1, &values[k], x * x + y * y});
  }
  std::vector<TpePreparedObservation> ranked = obs;
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.loss < b.loss; });
  std::vector<BohbPoint> good_points, bad_points;
  for (int i = 0; i < 40; ++i)  // good_count(40) = max(3, 6) = 6; bad: the other 34
    (i < 6 ? good_points : bad_points)
        .push_back({*(*ranked[i].values)[0], *(*ranked[i].values)[1]});
  const BohbKde l(good_points, {0, 0}, 1e-3), g(bad_points, {0, 0}, 1e-3);

  for (int samples : {1, 64}) {
    CAPTURE(samples);
    BohbSettings settings;
    settings.num_samples = samples;
    const BohbSampler bohb(leaves, settings);
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      SplitMix64 rng(seed), replay(seed);
      const std::vector<Json> proposal = bohb.propose(obs, rng);
      // The same candidates again, from l with the bandwidth tripled; the proposal is the
      // first with the smallest g/l.
      BohbPoint best;
      double best_score = HUGE_VAL;
      for (int i = 0; i < samples; ++i) {
        BohbPoint x = l.sample(replay, 3);
        const double score =
            std::max(g.log_pdf(x), std::log(1e-32)) - std::max(l.log_pdf(x), std::log(1e-32));
        if (best.empty() || score < best_score) best = x, best_score = score;
      }
      CHECK(proposal[0].get<double>() == best[0]);
      CHECK(proposal[1].get<double>() == best[1]);
    }
  }
}

TEST_CASE("bohb sampler: one joint density sees a dependence no per-hyperparameter model can") {
  // The good results lie on the diagonal x = y, the bad on the other one, x = 1 − y: each
  // hyperparameter on its own spreads evenly over [0, 1] in both sets, so a product of
  // per-hyperparameter densities cannot tell them apart; BOHB's joint l and g can.
  const std::vector<HyperparameterSpec> leaves(2, unit_double());
  std::vector<TpeInternalValues> values;
  for (int k = 0; k < 6; ++k) {
    const double t = 0.05 + 0.18 * k;
    values.push_back({t, t});
  }
  for (int k = 0; k < 34; ++k) {
    const double t = (k + 0.5) / 34;
    values.push_back({t, 1 - t});
  }
  std::vector<TpePreparedObservation> obs;
  for (int k = 0; k < 40; ++k) obs.push_back({k + 1, &values[k], k < 6 ? 0.01 * k : 1.0 + k});
  const BohbSampler bohb(leaves, BohbSettings{});
  int near_diagonal = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SplitMix64 rng(seed);
    const std::vector<Json> p = bohb.propose(obs, rng);
    near_diagonal += std::abs(p[0].get<double>() - p[1].get<double>()) < 0.1;
  }
  CHECK(near_diagonal >= 40);  // 43 of 50 when recorded; a product of marginals: ~10
}

TEST_CASE("bohb sampler: coordinates are ConfigSpace's, and a coordinate maps back to its value") {
  HyperparameterSpec n;
  n.type = HyperparameterSpec::Type::kInt;
  n.minval = 1;
  n.maxval = 4;
  HyperparameterSpec lr;
  lr.type = HyperparameterSpec::Type::kLog;
  lr.minval = -5;
  lr.maxval = -1;
  HyperparameterSpec opt;
  opt.type = HyperparameterSpec::Type::kCategorical;
  opt.vals = {"sgd", "adam", "rmsprop"};
  const BohbSampler bohb({n, lr, opt}, BohbSettings{});
  // An int owns the middle of its cell: 1 → 1/8, 4 → 7/8; anywhere in the cell maps back.
  CHECK(bohb.to_coordinate(0, 1) == doctest::Approx(0.125));
  CHECK(bohb.to_coordinate(0, 4) == doctest::Approx(0.875));
  CHECK(bohb.from_coordinate(0, 0.0) == 1);
  CHECK(bohb.from_coordinate(0, 0.2499) == 1);
  CHECK(bohb.from_coordinate(0, 0.25) == 2);
  CHECK(bohb.from_coordinate(0, 1.0) == 4);
  // A log range lives on its exponent.
  CHECK(bohb.to_coordinate(1, -3) == doctest::Approx(0.5));
  CHECK(bohb.from_coordinate(1, 0.5).get<double>() == doctest::Approx(1e-3));
  CHECK(bohb.from_coordinate(1, 1.0).get<double>() < 0.1);  // inside [minval, maxval)
  // A categorical value is its index.
  CHECK(bohb.to_coordinate(2, 2) == 2);
  CHECK(bohb.from_coordinate(2, 1) == "adam");
}

}  // namespace
}  // namespace cairn
