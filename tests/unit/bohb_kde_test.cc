// BOHB's model as HpBandSter builds it (bohb_kde.h, bohb_sampler.h): the normal-reference
// bandwidths with their floor and the categorical cap, the product-kernel density, candidates
// drawn with continuous bandwidths widened threefold (categorical ones not), HpBandSter's good
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
  // The same generator gives the same categorical draws whatever the factor. With h = 3/4 a
  // point's value is kept with 1 − h, else one of the 4 drawn uniformly (HpBandSter's draw,
  // which gives its own value (1 − h) + h/4 = 7/16, not the kernel's 1/4): 0 and 3, the two
  // points' values, 5/16 of the time each; 1 and 2, 3/16.
  SplitMix64 a(5), b(5);
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 4000; ++i) {
    const BohbPoint p = kde.sample(a, 1), q = kde.sample(b, 3);
    CHECK(p[1] == q[1]);
    ++counts[static_cast<size_t>(p[1])];
  }
  CHECK(std::abs(counts[0] - 1250) < 120);
  CHECK(std::abs(counts[1] - 750) < 120);
  CHECK(std::abs(counts[2] - 750) < 120);
  CHECK(std::abs(counts[3] - 1250) < 120);
  // Near an end the truncated draw stays inside [0, 1].
  const BohbKde edge({{0.0}, {0.02}}, {0}, 1e-3);
  SplitMix64 rng(3);
  for (int i = 0; i < 1000; ++i) {
    const double x = edge.sample(rng, 3)[0];
    CHECK(x >= 0);
    CHECK(x <= 1);
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
