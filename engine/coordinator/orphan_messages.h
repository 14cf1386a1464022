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

// The directory below DIR/orphans that holds the orphans of the ranks a session of `owner`
// (session_open's "HOST:STORE#ID") started: "o" and the first 16 hex digits of the SHA-256 of
// `owner`. Two stores whose experiments share an id never share it (docs/peers.md "Orphans on
// an agent").
std::string orphan_owner_dir(const std::string& owner);
// What names one trial's orphans on an agent: "<orphan_owner_dir>/<trial>" (also the key of
// agent_gc.h's holds on them).
std::string orphan_trial_key(const std::string& owner, const std::string& trial);

// The directory, below a trial's, of the orphans its attempt `attempt` (CAIRN_ATTEMPT; 0 when
// unset) left: "attempt-<attempt>". The agent makes it, so the SDK cannot name another.
std::string orphan_attempt_dir(int64_t attempt);

struct OrphanRequest {
  std::string owner;  // the coordinator's session owner
  std::string trial;
  int64_t attempt = 0, step = 0;  // orphan_fetch only
};

// The owner, trial (and, for orphan_fetch, the attempt and step) a request names, checked:
// the owner a string of 1 to 4096 bytes, the trial as check_trial_name allows, the attempt
// and step whole numbers in [0, 2^53). kBadInput, one line.
Status parse_orphan_request(const Json& request, bool needs_step, OrphanRequest* out);

// One orphan directory: the step the attempt's ranks checkpointed at.
struct OrphanStep {
  int64_t attempt = 0;
  int64_t step = 0;
  auto operator<=>(const OrphanStep&) const = default;
};

struct OrphanListing {
  bool running = false;
  std::vector<OrphanStep> orphans;  // ascending, each once
};

// An agent's orphan_list answer for `trial` ({"orphans": [{"attempt", "step"}, …]}), checked
// strictly: kBadInput (one line) for another type or trial, a non-boolean "running", orphans
// that are not objects of distinct (attempt, step) whole numbers in [0, 2^53), more than
// kMaxOrphanSteps of them. An "error" answer is kFailed with its reason.
Result<OrphanListing> parse_orphan_listing(const Json& answer, const std::string& trial);

}  // namespace cairn
