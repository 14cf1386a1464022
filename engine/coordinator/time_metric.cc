#include "engine/coordinator/time_metric.h"

#include <cmath>

namespace cairn {

int64_t searcher_progress(const std::string& time_metric, int64_t step, const Json& metrics) {
  if (time_metric.empty()) return step;
  if (!metrics.is_object() || !metrics.contains(time_metric)) return -1;
  const Json& value = metrics[time_metric];
  if (!value.is_number()) return -1;
  const double v = value.get<double>();
  // Past 2^62 the rung is reached anyway; the bound keeps the conversion defined.
  if (!std::isfinite(v) || v < 0) return -1;
  return v >= 4.6e18 ? int64_t{1} << 62 : static_cast<int64_t>(std::floor(v));
}

}  // namespace cairn
