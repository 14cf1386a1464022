// TPE, the tree-structured Parzen estimator (Bergstra et al. 2011), as Optuna 3.1's
// independent TPESampler draws one trial's hyperparameters from what earlier trials scored
// (docs/search.md, "TPE"): the observations are split into the good ones — the
// min(⌈gamma · n⌉, max_good) with the lowest loss — and the rest; for each hyperparameter
// separately (names in sorted order, nested maps flattened in place) a Parzen estimator l is
// fitted to the good values and g to the others, n_ei_candidates values are drawn from l,
// and the one with the highest l(x)/g(x) is taken. Constants are copied.
//
// A pure function of (specs, settings, observations, the generator's state): no clock, no
// hash order, ties broken by trial index. Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/config/config.h"
#include "engine/search/hparam_sampler.h"

namespace cairn {

struct TpeObservation {
  int64_t trial = 0;  // the order of observations: older trials first
  Json hparams;       // as the trial was created with
  double loss = 0;    // lower is better (MetricOrder::key); +inf for a missing metric
};

class TpeSampler {
 public:
  TpeSampler(const std::map<std::string, HyperparameterSpec>& specs, const TpeConfig& settings);

  // How many hyperparameters are searched (d): every one that is not a constant.
  int dimensions() const { return static_cast<int>(leaves_.size()); }

  // How many of n observations are good: min(⌈gamma · n⌉, max_good).
  static int64_t good_count(int64_t n, const TpeConfig& settings);

  // The hyperparameters TPE proposes after `observations` (any order; they are sorted by
  // trial), drawing every random number from `rng`. With no observations, l and g are
  // both the prior.
  Json sample(std::vector<TpeObservation> observations, SplitMix64& rng) const;

 private:
  // One searched hyperparameter: where it sits in the hparams and its spec.
  struct Leaf {
    std::vector<std::string> path;
    HyperparameterSpec spec;
  };
  Json propose(const Leaf& leaf, const std::vector<const Json*>& good,
               const std::vector<const Json*>& bad, SplitMix64& rng) const;

  std::map<std::string, HyperparameterSpec> specs_;
  TpeConfig settings_;
  std::vector<Leaf> leaves_;  // in sampling order
};

}  // namespace cairn
