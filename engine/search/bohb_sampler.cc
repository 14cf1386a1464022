#include "engine/search/bohb_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "engine/config/hparam_values.h"

namespace cairn {
namespace {

using Type = HyperparameterSpec::Type;

// HpBandSter's floor for each density before the ratio: 10⁻³², in logs.
const double kLogDensityFloor = std::log(1e-32);

}  // namespace

BohbSampler::BohbSampler(std::vector<HyperparameterSpec> leaves, const BohbSettings& settings)
    : leaves_(std::move(leaves)), settings_(settings) {
  for (const HyperparameterSpec& spec : leaves_)
    levels_.push_back(spec.type == Type::kCategorical ? static_cast<int>(spec.vals.size()) : 0);
}

int64_t BohbSampler::good_count(int64_t n) const {
  return std::max(min_points(), settings_.top_n_percent * n / 100);
}

int64_t BohbSampler::bad_count(int64_t n) const {
  return std::max(min_points(), (100 - settings_.top_n_percent) * n / 100);
}

bool BohbSampler::enough(int64_t n) const {
  const int64_t good = std::min(n, good_count(n));
  const int64_t bad = std::min(n - good, bad_count(n));
  return good > dimensions() && bad > dimensions();
}

double BohbSampler::to_coordinate(size_t leaf, double internal) const {
  const HyperparameterSpec& spec = leaves_[leaf];
  switch (spec.type) {
    case Type::kCategorical:
      return internal;
    case Type::kInt:
      return std::clamp((internal - spec.minval + 0.5) / (spec.maxval - spec.minval + 1), 0.0, 1.0);
    default: {
      const double width = spec.maxval - spec.minval;
      return width > 0 ? std::clamp((internal - spec.minval) / width, 0.0, 1.0) : 0.5;
    }
  }
}

Json BohbSampler::from_coordinate(size_t leaf, double coordinate) const {
  const HyperparameterSpec& spec = leaves_[leaf];
  switch (spec.type) {
    case Type::kCategorical: {
      const auto last = static_cast<double>(spec.vals.size() - 1);
      return spec.vals[static_cast<size_t>(std::clamp(std::round(coordinate), 0.0, last))];
    }
    case Type::kInt: {
      const double v = spec.minval + std::floor(coordinate * (spec.maxval - spec.minval + 1));
      return static_cast<int64_t>(std::clamp(v, spec.minval, spec.maxval));
    }
    default: {
      if (!(spec.maxval - spec.minval > 0)) return range_value(spec, 0);
      // Through range_value, so a value is one random sampling could give: inside
      // [minval, maxval), and base^x for log.
      return range_value(spec, std::clamp(coordinate, 0.0, kLargestUniform));
    }
  }
}

BohbKde BohbSampler::fit(const std::vector<const TpePreparedObservation*>& set,
                         SplitMix64& rng) const {
  const size_t d = leaves_.size();
  std::vector<BohbPoint> points;
  points.reserve(set.size());
  for (const TpePreparedObservation* o : set) {
    BohbPoint p(d, NAN);
    for (size_t j = 0; j < d; ++j)
      if (const std::optional<double>& x = (*o->values)[j]) p[j] = to_coordinate(j, *x);
    points.push_back(std::move(p));
  }
  for (BohbPoint& p : points) {
    for (size_t j = 0; j < d; ++j) {
      if (!std::isnan(p[j])) continue;
      std::vector<size_t> donors;
      for (size_t i = 0; i < points.size(); ++i)
        if (!std::isnan(points[i][j])) donors.push_back(i);
      if (!donors.empty()) {
        const auto k =
            std::min(static_cast<size_t>(rng.uniform() * donors.size()), donors.size() - 1);
        p[j] = points[donors[k]][j];
      } else if (levels_[j] > 0) {
        const auto c = static_cast<size_t>(levels_[j]);
        p[j] = static_cast<double>(
            std::min(static_cast<size_t>(rng.uniform() * static_cast<double>(c)), c - 1));
      } else {
        p[j] = rng.uniform();
      }
    }
  }
  return BohbKde(std::move(points), levels_, settings_.min_bandwidth);
}

std::vector<Json> BohbSampler::propose(std::vector<TpePreparedObservation> observations,
                                       SplitMix64& rng) const {
  // Ranked by loss, ties to the older trial: a strict order, so the arrival order of one
  // length's results does not matter.
  std::sort(observations.begin(), observations.end(),
            [](const TpePreparedObservation& a, const TpePreparedObservation& b) {
              return std::tie(a.loss, a.trial) < std::tie(b.loss, b.trial);
            });
  const auto n = static_cast<int64_t>(observations.size());
  const int64_t good_n = std::min(n, good_count(n));
  const int64_t bad_n = std::min(n - good_n, bad_count(n));
  std::vector<const TpePreparedObservation*> good, bad;
  for (int64_t i = 0; i < good_n + bad_n; ++i)
    (i < good_n ? good : bad).push_back(&observations[i]);
  const BohbKde l = fit(good, rng);
  const BohbKde g = fit(bad, rng);

  BohbPoint best;
  double best_score = HUGE_VAL;  // log g − log l: BOHB minimizes g(x) / l(x)
  for (int i = 0; i < settings_.num_samples; ++i) {
    BohbPoint x = l.sample(rng, settings_.bandwidth_factor);
    const double score =
        std::max(g.log_pdf(x), kLogDensityFloor) - std::max(l.log_pdf(x), kLogDensityFloor);
    if (best.empty() || score < best_score) {
      best = std::move(x);
      best_score = score;
    }
  }
  std::vector<Json> values;
  values.reserve(leaves_.size());
  for (size_t j = 0; j < leaves_.size(); ++j) values.push_back(from_coordinate(j, best[j]));
  return values;
}

}  // namespace cairn
