// How far `cairn reproduce` re-runs a recorded trial. A trial that stopped before the last
// length its searcher asked for (CANCELED, ERROR, STOPPED by the searcher mid-way, or not finished
// yet) is re-run to where it actually got, not to where it was going: trained further, the re-run
// would report steps the original never did, and --verify would call that a difference.
// Where it got is the last step it validated at, so that the re-run's last length ends at a
// validation the record also holds and both series cover the same steps; a trial that never
// validated is re-run to its last recorded training step.
#pragma once

#include <cstdint>
#include <vector>

#include "cli/trial_ref.h"

namespace cairn::cli {

struct ReplayExtent {
  std::vector<int64_t> lengths;  // what the re-run trains to, in order (the recorded ones, cut)
  int64_t end = 0;               // lengths.back(): the last step the re-run trains
  bool cut = false;              // the original stopped before its last recorded length
};

// REQUIRES: ref.train_lengths is not empty.
ReplayExtent replay_extent(const TrialRef& ref);

// The points of `series` up to step `end`.
std::vector<MetricPoint> up_to(const std::vector<MetricPoint>& series, int64_t end);

}  // namespace cairn::cli
