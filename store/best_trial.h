// Which trial of an experiment is its best: the one whose best validation of the searcher's
// metric is best by `order` (smallest, or largest with smaller_is_better: false); trials that
// never validated that metric as a number are not candidates; on a tie the earlier trial wins.
// One definition for the run's summary, `ls`, `show`, `best` and `compare EXP`, so that
// they agree while an experiment runs and after.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/metric_order.h"

namespace cairn {

// `trials` are trial records (store/schema.h) in trial order; nullptr when none qualifies.
const Json* best_trial(const std::vector<const Json*>& trials, const std::string& metric,
                       MetricOrder order);

}  // namespace cairn
