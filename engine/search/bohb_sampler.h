// BOHB's model-based proposal (Falkner et al., ICML 2018, Algorithm 2 and §3.1, with the
// defaults of its reference code, HpBandSter's config generator; docs/search.md, "BOHB"): of
// one length's n results, the good ones are the max(N_min, ⌊q · n⌋) lowest losses and the
// bad ones the next max(N_min, ⌊(1 − q) · n⌋) (N_min = d + 1); one multivariate KDE l is
// fitted to the good configurations and one, g, to the bad (bohb_kde.h); `num_samples`
// candidates are drawn from l with its continuous bandwidths widened `bandwidth_factor`-fold,
// and the one with the smallest g(x) / l(x) is taken (each density floored at 10⁻³², the first
// of equals).
//
// Where each hyperparameter lives for the KDE: a double or a log range (its exponent) is
// mapped linearly onto [0, 1]; an int range's value v onto the middle of its cell,
// (v − minval + ½) / (maxval − minval + 1) (so a draw anywhere in the cell rounds back to v);
// a categorical value is its index. These are ConfigSpace's vector forms, which HpBandSter's
// KDE works on.
//
// A pure function of (specs, settings, observations, the generator's state): no clock, no
// hash order, ties broken by trial index. Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "common/json.h"
#include "engine/config/config.h"
#include "engine/search/bohb_kde.h"
#include "engine/search/tpe_sampler.h"

namespace cairn {

// HpBandSter's BOHB defaults (hpbandster/optimizers/config_generators/bohb.py), which are
// the paper's: not tuned on cairn's benchmarks.
struct BohbSettings {
  int top_n_percent = 15;            // q: the good share of a length's results, in percent
  int num_samples = 64;              // candidates drawn from l per proposal
  double random_fraction = 1.0 / 3;  // ρ: trials drawn at random even with a model
  double bandwidth_factor = 3;       // how much wider l's continuous kernels are when drawing
  double min_bandwidth = 1e-3;       // the floor of every bandwidth
};

class BohbSampler {
 public:
  // `leaves`: the searched hyperparameters in TpeSampler's sampling order (leaf_specs()).
  BohbSampler(std::vector<HyperparameterSpec> leaves, const BohbSettings& settings);

  int dimensions() const { return static_cast<int>(leaves_.size()); }
  // N_min = d + 1: the fewest good, and the fewest bad, results a model is fitted on.
  int64_t min_points() const { return dimensions() + 1; }
  // Of n results: max(N_min, ⌊q · n / 100⌋) good; the next max(N_min, ⌊(100 − q) · n / 100⌋)
  // bad (HpBandSter's n_good and n_bad; with both floors over n, the worst are left out).
  int64_t good_count(int64_t n) const;
  int64_t bad_count(int64_t n) const;
  // Whether n results make a model: more than d good ones and more than d bad ones, so at
  // least 2 · N_min results (HpBandSter builds a length's KDEs only then).
  bool enough(int64_t n) const;

  // The leaf values BOHB proposes after `observations` (one length's; any order: they are
  // ranked by (loss, trial)), drawing every random number from `rng`.
  // REQUIRES: enough(observations.size()); each observation's values one per leaf.
  std::vector<Json> propose(std::vector<TpePreparedObservation> observations,
                            SplitMix64& rng) const;

  // A leaf value's coordinate for the KDE (above), and back.
  double to_coordinate(size_t leaf, double internal) const;
  Json from_coordinate(size_t leaf, double coordinate) const;

 private:
  // The KDE of these observations' configurations; a value a trial lacks is imputed from
  // another of the set that has one, picked by `rng`, or drawn uniformly (HpBandSter's
  // impute_conditional_data).
  BohbKde fit(const std::vector<const TpePreparedObservation*>& set, SplitMix64& rng) const;

  std::vector<HyperparameterSpec> leaves_;
  std::vector<int> levels_;  // per leaf: 0 continuous, c for a categorical of c values
  BohbSettings settings_;
};

}  // namespace cairn
