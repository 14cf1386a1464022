#include "engine/search/bohb_kde.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/search/truncated_normal.h"

namespace cairn {

BohbKde::BohbKde(std::vector<BohbPoint> points, std::vector<int> levels, double min_bandwidth)
    : points_(std::move(points)), levels_(std::move(levels)) {
  const size_t n = points_.size(), d = levels_.size();
  // statsmodels' normal reference rule: 1.06 · σ · n^(−1/(4 + d)), σ with ddof 0 (np.std).
  const double scale =
      1.06 * std::pow(static_cast<double>(n), -1.0 / (4.0 + static_cast<double>(d)));
  bandwidths_.assign(d, 0.0);
  draw_bandwidths_.assign(d, 0.0);
  for (size_t j = 0; j < d; ++j) {
    double mean = 0;
    for (const BohbPoint& p : points_) mean += p[j];
    mean /= static_cast<double>(n);
    double var = 0;
    for (const BohbPoint& p : points_) var += (p[j] - mean) * (p[j] - mean);
    var /= static_cast<double>(n);
    double h = std::max(scale * std::sqrt(var), min_bandwidth);
    // HpBandSter draws candidates with the floored bandwidth as statsmodels gives it: its
    // "keep the point's value with 1 − h" is uniform once h ≥ 1, with no cap to undo that.
    draw_bandwidths_[j] = h;
    if (levels_[j] > 0) {
      // Aitchison–Aitken's λ lies in [0, (c − 1)/c]: at the top the kernel is uniform.
      const double c = static_cast<double>(levels_[j]);
      h = std::min(h, (c - 1) / c);
    }
    bandwidths_[j] = h;
  }
}

double BohbKde::log_pdf(const BohbPoint& x) const {
  const size_t d = levels_.size();
  // Each dimension's kernel in logs; a categorical one takes one of two values per x.
  std::vector<double> same(d), other(d), log_h(d);
  for (size_t j = 0; j < d; ++j) {
    const double h = bandwidths_[j];
    if (levels_[j] > 0) {
      same[j] = std::log1p(-h);
      other[j] = levels_[j] > 1 ? std::log(h / (levels_[j] - 1)) : -HUGE_VAL;
    } else {
      log_h[j] = std::log(h);
    }
  }
  const double log_norm = 0.5 * std::log(2 * std::numbers::pi);
  std::vector<double> terms;
  terms.reserve(points_.size());
  double top = -HUGE_VAL;
  for (const BohbPoint& p : points_) {
    double t = 0;
    for (size_t j = 0; j < d && t > -HUGE_VAL; ++j) {
      if (levels_[j] > 0) {
        t += x[j] == p[j] ? same[j] : other[j];
      } else {
        const double z = (x[j] - p[j]) / bandwidths_[j];
        t += -0.5 * z * z - log_norm - log_h[j];
      }
    }
    terms.push_back(t);
    top = std::max(top, t);
  }
  if (top == -HUGE_VAL) return -HUGE_VAL;
  double sum = 0;
  for (double t : terms) sum += std::exp(t - top);
  return top + std::log(sum) - std::log(static_cast<double>(points_.size()));
}

BohbPoint BohbKde::sample(SplitMix64& rng, double bandwidth_factor) const {
  const size_t n = points_.size();
  const auto pick = std::min(static_cast<size_t>(rng.uniform() * static_cast<double>(n)), n - 1);
  const BohbPoint& m = points_[pick];
  BohbPoint out(levels_.size());
  for (size_t j = 0; j < levels_.size(); ++j) {
    const double h = draw_bandwidths_[j];
    if (levels_[j] > 0) {
      if (rng.uniform() < 1 - h) {  // never when h ≥ 1, as HpBandSter's np.random.rand() < 1 − h
        out[j] = m[j];
      } else {
        const auto c = static_cast<size_t>(levels_[j]);
        out[j] = static_cast<double>(
            std::min(static_cast<size_t>(rng.uniform() * static_cast<double>(c)), c - 1));
      }
    } else {
      const double s = bandwidth_factor * h;
      const double z = truncated_normal_at(-m[j] / s, (1 - m[j]) / s, rng.uniform());
      out[j] = std::clamp(m[j] + s * z, 0.0, 1.0);
    }
  }
  return out;
}

}  // namespace cairn
