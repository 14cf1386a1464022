// libFuzzer target: bytes as an authenticated peer may send them in the orphan requests
// (engine/coordinator/orphan_messages.h, docs/peers.md "Orphans on an agent"), parsed as
// untrusted JSON and checked both as the agent checks a request (the trial and step it names)
// and as the coordinator checks an agent's listing. Any crash, sanitizer report or broken
// invariant (abort) is a finding.
//
// ctest runs it over tests/fuzz/corpus/orphan_listing for a bounded number of runs. To fuzz
// longer: build/fuzz/orphan_listing_fuzz -max_total_time=600 tests/fuzz/corpus/orphan_listing
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/untrusted_json.h"
#include "engine/coordinator/orphan_messages.h"
#include "peer/checkpoint_manifest.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void one_line(const cairn::Status& st) {
  check(!st.message().empty() && st.message().find('\n') == std::string::npos &&
        st.message().size() < 700);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = cairn::parse_untrusted_json(text);
  if (!json.ok()) return 0;
  // The agent's side: a trial id that is one plain path component, a step in range.
  for (bool needs_step : {false, true}) {
    cairn::OrphanRequest asked;
    asked.step = -1;
    cairn::Status st = cairn::parse_orphan_request(*json, needs_step, &asked);
    const std::string& trial = asked.trial;
    const int64_t step = asked.step;
    if (!st.ok()) {
      one_line(st);
      continue;
    }
    check(cairn::check_trial_name(trial).ok());
    check(!asked.owner.empty() && asked.owner.size() <= 4096);
    // The owner is never a path: it names its directory by a hash.
    const std::string dir = cairn::orphan_owner_dir(asked.owner);
    check(dir.size() == 17 && dir.find('/') == std::string::npos && dir != "." && dir != "..");
    check(trial != "." && trial != ".." && trial.find('/') == std::string::npos);
    if (needs_step) check(step >= 0 && step < (int64_t{1} << 53));
    if (needs_step) check(asked.attempt >= 0 && asked.attempt < (int64_t{1} << 53));
  }
  // The coordinator's side: a listing for the trial it asked about, (attempt, step) distinct and
  // sorted.
  const std::string asked = json->is_object() && json->value("trial", cairn::Json()).is_string()
                                ? (*json)["trial"].get<std::string>()
                                : "1.1";
  auto listing = cairn::parse_orphan_listing(*json, asked);
  if (!listing.ok()) {
    one_line(listing.status());
    return 0;
  }
  const auto& orphans = listing->orphans;
  check(orphans.size() <= cairn::kMaxOrphanSteps);
  for (size_t i = 0; i < orphans.size(); ++i) {
    check(orphans[i].step >= 0 && orphans[i].step < (int64_t{1} << 53));
    check(orphans[i].attempt >= 0 && orphans[i].attempt < (int64_t{1} << 53));
    if (i > 0) check(orphans[i - 1] < orphans[i]);
  }
  return 0;
}
