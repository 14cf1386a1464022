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
#include <optional>
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

// A searched hyperparameter's value where the estimators see it (the number, a log range's
// exponent, a categorical value's index), one per TpeSampler leaf in sampling order; nullopt
// where the trial has no value the spec could have produced (a config changed since).
using TpeInternalValues = std::vector<std::optional<double>>;

// An observation with its values already converted (TpeSampler::internal_values), so that a
// searcher converts each trial's hyperparameters once, not once per later trial it samples.
struct TpePreparedObservation {
  int64_t trial = 0;
  const TpeInternalValues* values = nullptr;  // REQUIRES: not null, one per leaf
  double loss = 0;
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

  // The same proposal from observations converted beforehand: for equal observations and
  // generator states, exactly what sample() returns (sample() converts, then calls this).
  // Per call O(n log n) in the n observations, plus the estimators' density at the
  // candidates, O(n_ei_candidates · n); no hyperparameter JSON is read or copied.
  Json sample_prepared(std::vector<TpePreparedObservation> observations, SplitMix64& rng) const;

  // `hparams` converted for sample_prepared(), one value per leaf.
  TpeInternalValues internal_values(const Json& hparams) const;

  // The searched hyperparameters' specs in sampling order: what internal_values() converts.
  std::vector<HyperparameterSpec> leaf_specs() const;
  // The hyperparameters with these values, one per leaf in sampling order, and the
  // constants. REQUIRES: leaf_values.size() == dimensions().
  Json assemble(const std::vector<Json>& leaf_values) const;

 private:
  // One searched hyperparameter: where it sits in the hparams and its spec.
  struct Leaf {
    std::vector<std::string> path;
    HyperparameterSpec spec;
  };
  Json propose(const Leaf& leaf, const std::vector<double>& good_x,
               const std::vector<double>& bad_x, SplitMix64& rng) const;

  std::map<std::string, HyperparameterSpec> specs_;
  TpeConfig settings_;
  std::vector<Leaf> leaves_;  // in sampling order
};

}  // namespace cairn
