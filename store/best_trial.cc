#include "store/best_trial.h"

namespace cairn {

const Json* best_trial(const std::vector<const Json*>& trials, const std::string& metric,
                       MetricOrder order) {
  const Json* best = nullptr;
  double best_value = 0;
  for (const Json* t : trials) {
    const Json bv = t->value("best_validation", Json());
    if (!bv.is_object() || !bv.contains(metric) || !bv[metric].is_number()) continue;
    const double v = bv[metric].get<double>();
    if (!best || order.better(v, best_value)) {
      best = t;
      best_value = v;
    }
  }
  return best;
}

}  // namespace cairn
