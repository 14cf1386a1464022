// Deterministic sampling (SPEC §3): the hyperparameters and seed of the k-th trial are a
// pure function of (experiment seed, k), with keys visited in sorted order, so the same
// config and seed give the same trials on any machine, under any timing, across resumes.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/json.h"
#include "engine/config/config.h"
#include "engine/config/hparam_values.h"

namespace cairn {

// A small counter-based generator (SplitMix64): its whole state is one integer, so a
// sample depends on nothing but the key it was started from.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next();
  double uniform();  // [0, 1); at most kLargestUniform (engine/config/hparam_values.h)

 private:
  uint64_t state_;
};

// One value of `spec`, drawn from `rng` (a nested spec: each child in sorted order).
Json sample_one(const HyperparameterSpec& spec, SplitMix64& rng);

Json sample_hparams(const std::map<std::string, HyperparameterSpec>& specs,
                    uint64_t experiment_seed, int64_t trial_index);
// The trial's own seed: below 2^31 so it suits every framework's seeding call.
uint64_t trial_seed(uint64_t experiment_seed, int64_t trial_index);

}  // namespace cairn
