// Which hyperparameters matter most, for `cairn report`: a simple estimate with its method
// named on the page (man/cairn.1, `cairn report`).
//
// Method: for each hyperparameter, the share of the variance of the trials' metric ranks that
// its value alone explains — the correlation ratio η² = SS_between / SS_total over the
// groups of trials that share a value. Categorical values are their own groups; numeric ones
// with more than kBins distinct values are cut into kBins groups of (nearly) equal count.
// Ranks (1 = best) rather than raw values, so one diverged trial does not decide it. Needs
// at least 4 trials with a metric; η² overstates with few trials per group, and it sees
// each hyperparameter alone (no interactions), unlike fANOVA.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"

namespace cairn::cli {

struct Importance {
  std::string name;
  double eta_squared = 0;  // 0 (no effect seen) … 1 (the value decides the rank)
  int groups = 0;
};

inline constexpr int kImportanceBins = 5;
inline constexpr const char* kImportanceMethod =
    "η² (correlation ratio): the share of the variance of the trials' metric ranks explained "
    "by each hyperparameter alone; numeric values in up to 5 equal-count bins";

// `hparams[i]` and `rank[i]` belong to trial i; trials without a rank are left out. Returns
// the hyperparameters that vary, most important first; empty with fewer than 4 ranked trials.
std::vector<Importance> hparam_importance(const std::vector<std::map<std::string, Json>>& hparams,
                                          const std::vector<std::optional<double>>& rank);

}  // namespace cairn::cli
