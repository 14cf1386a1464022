#include "cli/replay_extent.h"

#include <algorithm>

namespace cairn::cli {

ReplayExtent replay_extent(const TrialRef& ref) {
  ReplayExtent extent{ref.train_lengths, ref.train_lengths.back(), false};
  // A completed trial trained every length it was asked for.
  if (ref.trial.value("state", "") == "COMPLETED") return extent;
  int64_t reached = 0;
  for (const MetricPoint& p : ref.validation) reached = std::max(reached, p.step);
  if (reached == 0)
    for (const MetricPoint& p : ref.training) reached = std::max(reached, p.step);
  // Nothing recorded to stop at (it never reported a step): replayed as asked.
  if (reached <= 0 || reached >= extent.end) return extent;
  std::erase_if(extent.lengths, [&](int64_t length) { return length >= reached; });
  extent.lengths.push_back(reached);
  extent.end = reached;
  extent.cut = true;
  return extent;
}

std::vector<MetricPoint> up_to(const std::vector<MetricPoint>& series, int64_t end) {
  std::vector<MetricPoint> out;
  for (const MetricPoint& p : series)
    if (p.step <= end) out.push_back(p);
  return out;
}

}  // namespace cairn::cli
