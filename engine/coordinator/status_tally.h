// What the live status line (status_line.h) counts, kept so that a redraw costs O(live
// trials), not O(all trials): a search of 5,000 trials has a handful running. Each trial's
// share is added once when it finishes (the coordinator drops it from its live set then, or
// loads it finished on resume); a redraw adds the live trials' shares to that.
//
// Thread-safety: the coordinator's thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/coordinator/status_line.h"

namespace cairn {

// A live trial as the status line sees it.
struct LiveTrialStatus {
  enum class Kind { kRunning, kPaused, kQueued, kFinished };
  Kind kind = Kind::kQueued;
  const Json* record = nullptr;  // its record: "id", "steps_completed", "best_validation"
  double quiet_s = 0;            // running: seconds since it was last heard
};

class StatusTally {
 public:
  StatusTally(std::string metric, bool smaller_is_better)
      : metric_(std::move(metric)), smaller_is_better_(smaller_is_better) {}

  // A trial finished for good: its units and best validation count from now on. Called once
  // per trial.
  void add_finished(const Json& record);
  int finished() const { return done_; }

  // The counts, units done and best so far of the finished trials plus `live`; the rest of
  // StatusFacts (plan, time) is the caller's. `silence_after`: a running trial quiet longer
  // than this shows. O(live.size()).
  StatusFacts facts(const std::vector<LiveTrialStatus>& live, double silence_after) const;

 private:
  // Offers a record's best validation to best/best_id.
  void offer(const Json& record, std::optional<double>& best, std::string& best_id) const;

  std::string metric_;
  bool smaller_is_better_;
  int done_ = 0;
  int64_t units_ = 0;
  std::optional<double> best_;
  std::string best_id_;
};

}  // namespace cairn
