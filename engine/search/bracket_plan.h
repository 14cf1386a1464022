// How Hyperband and ASHA lay out their brackets (SPEC §3, docs/search.md). Pure functions of
// the searcher config, so a plan can be tested, shown and rebuilt without running anything.
// Lengths are whole units: every computed length is rounded down (with a small tolerance,
// so 81·3⁻² is 9, not 8.999…) and never below 1; a rung whose length equals the rung before
// it is dropped, so every promotion trains at least one more unit.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/config/config.h"

namespace cairn {

struct RungPlan {
  int64_t length = 0;
  int64_t trials = 0;  // how many trials reach this rung when none errors
};

struct BracketPlan {
  int64_t trials = 0;           // trials the bracket creates (the first rung's population)
  std::vector<RungPlan> rungs;  // ascending lengths; the last is max_length
};

// ⌊log_base(x)⌋ for x >= 1 and base > 1, exact where floating point is not: (81, 3) is 4.
int floor_log(double x, double base);

// Splits `total` trials across brackets in proportion to `weights`: each gets the floor of
// its share, the first gets what rounding left over, and no bracket is left empty while
// there are enough trials (one taken from the largest). With fewer trials than brackets,
// the first `total` brackets get one each. The parts always sum to `total`.
std::vector<int64_t> split_trials(int64_t total, const std::vector<double>& weights);

// Hyperband (Li et al.): one iteration of s_max + 1 brackets, the most aggressive first.
// max_trials (when > 0 and below the iteration's total) scales every bracket down with
// split_trials. kBadInput (message "searcher.KEY: …") for a plan too large to run.
Result<std::vector<BracketPlan>> hyperband_plan(const SearcherConfig& config);

// Adaptive ASHA: the rung ladder max_length·η^-k, the brackets `mode` picks, and
// max_trials split across them as Determined's adaptive_asha does (docs/search.md).
std::vector<BracketPlan> asha_plan(const SearcherConfig& config);

}  // namespace cairn
