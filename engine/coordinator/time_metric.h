// How far a validation says a trial has trained, in the searcher's unit: its step, or with
// searcher.time_metric (Determined 0.38's model, docs/determined.md) the value of that
// metric. A pure function, unit-tested without a coordinator.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"

namespace cairn {

// `step` when `time_metric` is empty; else the metric's value rounded down, or -1 when the
// validation does not carry it as a finite number ≥ 0 (it then reaches no rung).
int64_t searcher_progress(const std::string& time_metric, int64_t step, const Json& metrics);

}  // namespace cairn
