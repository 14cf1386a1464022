// The Parzen estimators of TPE (Bergstra et al. 2011), one hyperparameter at a time, with
// Optuna 3.1's univariate rules as the reference (docs/search.md, "TPE"): one mixture
// component per observation plus a prior component, observation weights that ramp down the
// oldest once there are more than 25, and bandwidths from the distance to the neighbouring
// observations, clipped. Numerical values live in an internal space where the estimator is
// a mixture of truncated Gaussians (an int is a grid of step 1 whose values own the
// interval ±½ around them; a log range is its exponent); categorical values are indices.
// Immutable after construction; thread-safe. Sampling draws from the SplitMix64 it is
// handed and nothing else.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/search/hparam_sampler.h"

namespace cairn {

struct ParzenSettings {
  double prior_weight = 1.0;        // > 0: the prior component's weight before normalizing
  bool consider_magic_clip = true;  // bandwidths at least range / min(100, components + 1)
  bool consider_endpoints = false;  // the outermost observations' bandwidth may reach an end
};

// The weights of n observations given oldest first (Optuna's default_weights): all 1 up to
// 25 observations; beyond, the newest 25 weigh 1 and the older ones ramp linearly from 1/n
// (the oldest) to 1.
std::vector<double> tpe_observation_weights(size_t n);

// A numerical hyperparameter: observations in [low, high] (the values themselves, oldest
// first). `step` 0 is a continuous range; `step` > 0 a grid low, low + step, … high whose
// estimator spans [low − step/2, high + step/2], as Optuna's IntDistribution.
// REQUIRES: low < high, or low == high with step > 0.
class NumericalParzen {
 public:
  NumericalParzen(const std::vector<double>& observations, double low, double high, double step,
                  const ParzenSettings& settings);

  // A draw: a component picked by weight, then its truncated Gaussian by inversion; on a
  // grid, rounded to the nearest point (halves to even) within [low, high].
  double sample(SplitMix64& rng) const;
  // log density at `x` (continuous), or log probability of the grid point `x` (with step).
  double log_pdf(double x) const;

  // Components: the observations in the order given, then the prior.
  const std::vector<double>& weights() const { return weights_; }  // sum to 1
  const std::vector<double>& mus() const { return mus_; }
  const std::vector<double>& sigmas() const { return sigmas_; }

 private:
  double low_, high_;  // of the values
  double step_;
  double lower_, upper_;  // of the estimator: [low, high], or widened by step / 2
  std::vector<double> weights_, mus_, sigmas_;
  std::vector<double> log_weights_;
  std::vector<double> log_mass_;  // per component: log of its Gaussian's mass in [lower, upper]
  std::vector<double> log_norm_;  // per component: log(√(2π) σ) + log_mass_, for densities
};

// A categorical hyperparameter of `choices` values: observations are indices, oldest first.
// Component i puts prior_weight / (n + 1) on every choice plus 1 on its observation, then is
// normalized; the prior component is uniform.
class CategoricalParzen {
 public:
  CategoricalParzen(const std::vector<int>& observations, int choices,
                    const ParzenSettings& settings);

  int sample(SplitMix64& rng) const;
  double log_pdf(int choice) const;

  const std::vector<double>& weights() const { return weights_; }
  // probabilities()[component][choice]
  const std::vector<std::vector<double>>& probabilities() const { return probabilities_; }

 private:
  std::vector<double> weights_;
  std::vector<std::vector<double>> probabilities_;
};

}  // namespace cairn
