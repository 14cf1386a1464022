// Deterministic sampling (SPEC §3): the hyperparameters and seed of the k-th trial are a
// pure function of (experiment seed, k), with keys visited in sorted order, so the same
// config and seed give the same trials on any machine, under any timing, across resumes.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/json.h"
#include "engine/config.h"

namespace cairn {

// A small counter-based generator (SplitMix64): its whole state is one integer, so a
// sample depends on nothing but the key it was started from.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next();
  double uniform();  // [0, 1)

 private:
  uint64_t state_;
};

// The largest value SplitMix64::uniform() returns.
inline constexpr double kLargestUniform = 1 - 0x1.0p-53;

// A double or log range's value at `u` in [0, 1), as sample_hparams draws it: minval + (maxval
// - minval) * u, kept below maxval where rounding would reach it, so that a range is [minval,
// maxval) as docs/config.md says; for log, base to that power. The config check of builtin:mlp
// uses it to know the ends of what a search draws (engine/config_builtin_mlp.cc).
double range_value(const HyperparameterSpec& spec, double u);

Json sample_hparams(const std::map<std::string, HyperparameterSpec>& specs,
                    uint64_t experiment_seed, int64_t trial_index);
// The trial's own seed: below 2^31 so it suits every framework's seeding call.
uint64_t trial_seed(uint64_t experiment_seed, int64_t trial_index);

}  // namespace cairn
