// The JSON body of each notification (docs/config.md, "Notifications"): a `text` line that a
// Slack or Mattermost incoming webhook shows as is, and the same facts as structured fields.
// Pure functions of the facts given, so they are unit-tested without a coordinator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/json.h"
#include "engine/config/config.h"

namespace cairn {

// What every payload says about its experiment.
struct NotifyExperiment {
  int64_t id = 0;
  std::string name;
  std::string state;  // COMPLETED, ERROR, CANCELED, PAUSED, ACTIVE
  std::string host;   // the machine that drives it
};

struct NotifyBest {
  std::string trial;  // "7.3"
  std::string metric;
  double value = 0;
};

struct NotifyCounts {
  int total = 0;
  int completed = 0;
  int errored = 0;
};

// The experiment reached a final state (or was paused or interrupted).
Json experiment_end_payload(const NotifyExperiment& exp, const NotifyCounts& counts,
                            const std::optional<NotifyBest>& best);
// A trial ended in ERROR: out of restarts, a permanent failure, or it could not start.
Json trial_error_payload(const NotifyExperiment& exp, const std::string& trial,
                         const std::string& why, int restarts);
// The searcher's best so far got better.
Json best_improved_payload(const NotifyExperiment& exp, const NotifyBest& best);

// "experiment_end", "trial_error", "best_improved": the payload's `event` field.
const char* notify_event_name(NotifyEvent event);

// This machine's name, for `host`.
std::string notify_host_name();

}  // namespace cairn
