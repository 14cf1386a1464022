// The values a hyperparameter spec stands for, as a pure function of the spec: a grid's
// points, and where in a double or log range a uniform draw lands. The searchers
// (engine/search/) enumerate and sample with these; the config check of builtin:mlp
// (config_builtin_mlp.cc) uses them to judge every value a search can produce without
// depending on the search code.
#pragma once

#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "engine/config/config.h"

namespace cairn {

// The values one hyperparameter takes on the grid (docs/search.md):
// int: every integer of [minval, maxval], or with count N, min(N, range size) evenly spaced
// integers, each rounded to the nearest (halves away from zero), both ends included;
// double: N evenly spaced values, both ends included; log: base^x for N evenly spaced
// exponents x; with N = 1, the midpoint of the range (of the exponents for log);
// categorical: every value in order; const: itself.
// kBadInput ("count: …") for a double or log without count.
// REQUIRES: `spec` is not kNested.
Result<std::vector<Json>> grid_values(const HyperparameterSpec& spec);

// The largest value a sampler's uniform draw takes (SplitMix64::uniform(),
// engine/search/hparam_sampler.h).
inline constexpr double kLargestUniform = 1 - 0x1.0p-53;

// A double or log range's value at `u` in [0, 1), as sample_hparams draws it: minval + (maxval
// - minval) * u, kept below maxval where rounding would reach it, so that a range is [minval,
// maxval) as docs/config.md says; for log, base to that power. The searchers draw with it; the
// config check of builtin:mlp uses it to know the ends of what a search draws.
double range_value(const HyperparameterSpec& spec, double u);

}  // namespace cairn
