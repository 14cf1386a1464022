// BOHB's density (Falkner et al., ICML 2018, §3.1; HpBandSter's config generator, which fits
// statsmodels' KDEMultivariate with its normal-reference bandwidth): ONE product-kernel density
// over all searched hyperparameters at once, not one estimator per hyperparameter as TPE's.
// A point has one coordinate per dimension: a number in [0, 1] for a continuous dimension (a
// range mapped onto the unit interval), a value's index for a categorical one.
//
//   density(x) = (1/n) Σ_i Π_j k_j(x_j; X_ij, h_j)
//   continuous:  k = φ((x − X) / h) / h         (a Gaussian, not truncated, as statsmodels')
//   categorical: k = 1 − h where x = X, h / (c − 1) elsewhere   (Aitchison and Aitken)
//   h_j = 1.06 · σ_j · n^(−1/(4 + d))           (σ_j: the points' standard deviation, ddof 0)
//
// then at least `min_bandwidth` (HpBandSter's 10⁻³, which keeps a dimension whose points all
// agree from collapsing), and a categorical one at most (c − 1) / c, where its kernel is
// uniform (statsmodels leaves it unbounded, so that above 1 the kernel goes negative; see
// docs/search.md, "BOHB"). That cap is the density's only: candidates are drawn with the
// bandwidths HpBandSter draws with, floored but not capped (draw_bandwidths()).
//
// Immutable after construction; thread-safe. Sampling draws from the SplitMix64 it is handed
// and nothing else.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/search/hparam_sampler.h"

namespace cairn {

using BohbPoint = std::vector<double>;

class BohbKde {
 public:
  // `levels[j]`: 0 for a continuous dimension, the number of values c ≥ 1 for a categorical one.
  // REQUIRES: `points` not empty, each with levels.size() coordinates; a categorical one an
  // index below its c.
  BohbKde(std::vector<BohbPoint> points, std::vector<int> levels, double min_bandwidth);

  size_t size() const { return points_.size(); }
  const std::vector<BohbPoint>& points() const { return points_; }
  // The density's bandwidths (floored; a categorical one capped at (c − 1) / c).
  const std::vector<double>& bandwidths() const { return bandwidths_; }
  // The bandwidths candidates are drawn with: HpBandSter's `kde_good.bw` after its clip, floored
  // at min_bandwidth and not capped. Equal to bandwidths() but on a categorical dimension whose
  // spread passes the cap, where HpBandSter keeps the point's value with 1 − h ≤ 1/c (never,
  // once h ≥ 1: a uniform draw) and the cap would keep it with 1/c.
  const std::vector<double>& draw_bandwidths() const { return draw_bandwidths_; }

  // log density(x); −inf where every kernel vanishes (a categorical value no point has, with
  // h = 0). Computed in logs, so a density far below the double range stays ordered.
  double log_pdf(const BohbPoint& x) const;

  // One of BOHB's candidates: a point picked uniformly, then, for each dimension in order, a
  // continuous coordinate drawn from the normal around the point's with standard deviation
  // `bandwidth_factor` · h truncated to [0, 1], and a categorical one kept with probability
  // 1 − h (none when h ≥ 1), else drawn uniformly from its c values (HpBandSter's sampling;
  // the factor widens continuous dimensions only; h from draw_bandwidths()).
  BohbPoint sample(SplitMix64& rng, double bandwidth_factor) const;

 private:
  std::vector<BohbPoint> points_;
  std::vector<int> levels_;
  std::vector<double> bandwidths_;
  std::vector<double> draw_bandwidths_;
};

}  // namespace cairn
