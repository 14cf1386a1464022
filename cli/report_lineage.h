// `cairn report`'s lineage of a population-based training search: which trial each clone
// came from and the step it was cloned at, as an inline SVG (one bar per trial over the steps
// it trained, a link from the parent's bar at the clone step to the clone's), and as text for
// the trial table. Pure functions of the trial records; no I/O.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace cairn::cli {

// "1.3 @ 4": the parent and the step a clone started from, from its record's "parent"
// ({"trial", "step"}); "" for a trial that is not a clone.
std::string parent_text(const Json& trial_record);

// The lineage chart of one experiment: "" when none of `trial_records` is a clone. Trials are
// drawn in family order (each clone below its parent, siblings by id), each as a bar from
// the step it started at (its parent step, or 0) to its steps_completed, with a <title>
// naming the trial, its parent and step, its state and `best` text when given. Bars carry
// data-trial (and data-parent for clones) so that tests and readers can follow them.
// `best_text[i]` (may be empty) describes trial_records[i]'s best metric.
std::string lineage_chart(const std::string& exp_id, const std::vector<Json>& trial_records,
                          const std::vector<std::string>& best_text);

}  // namespace cairn::cli
