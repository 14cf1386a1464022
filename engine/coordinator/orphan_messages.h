// The orphan requests' untrusted parts (remote_orphans.h, docs/peers.md "Orphans on an
// agent"): what the agent reads from a request, what the coordinator reads from an agent's
// listing. Kept apart from the exchanges so that the fuzzer (tests/fuzz/orphan_listing_fuzz.cc)
// links them alone.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace cairn {

// At most this many orphan steps are listed for one trial (the newest are kept).
inline constexpr size_t kMaxOrphanSteps = 1000;

// The trial (and, for orphan_fetch, the step) a request names, checked: the trial as
// check_trial_name allows, the step a whole number in [0, 2^53). kBadInput, one line.
Status parse_orphan_request(const Json& request, bool needs_step, std::string* trial,
                            int64_t* step);

struct OrphanListing {
  bool running = false;
  std::vector<int64_t> steps;  // ascending, each once
};

// An agent's orphan_list answer for `trial`, checked strictly: kBadInput (one line) for
// another type or trial, a non-boolean "running", steps that are not distinct whole numbers
// in [0, 2^53), more than kMaxOrphanSteps of them. An "error" answer is kFailed with its reason.
Result<OrphanListing> parse_orphan_listing(const Json& answer, const std::string& trial);

}  // namespace cairn
