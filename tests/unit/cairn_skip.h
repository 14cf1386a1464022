// Skips a doctest case visibly. doctest has no skip at run time: a case that prints a
// message and returns counts as passed, so a suite could pass on a machine where nothing
// ran. CAIRN_SKIP records the reason; tests/unit/main.cc then turns the run's skips into
// an exit status ctest understands (tests/README.md, "Skips"):
//   - a reason that no pattern of tests/skip_allowlist.txt matches fails the run;
//   - with CAIRN_TEST_NO_SKIPS=1 (entries whose capability is always there, such as the
//     host-emulated GPU) any skip fails the run;
//   - cases that ran beside skipped ones fail the run: the skip would hide in "Passed".
//     A case that may skip carries "[needs CAPABILITY]" in its name, and ctest runs those
//     in an entry of their own (CMakeLists.txt, -tc=*[needs CAPABILITY]*);
//   - when every case of the run skipped for allowed reasons, the exit status is 77,
//     which ctest lists as "Skipped".
#pragma once

#include <sstream>
#include <string>

#include <doctest/doctest.h>

namespace cairn::testing {

// Records that the running case skipped, and why ("needs CAPABILITY: detail").
void record_skip(const std::string& reason);

}  // namespace cairn::testing

#define CAIRN_SKIP(reason)                                  \
  do {                                                      \
    std::ostringstream cairn_skip_reason;                   \
    cairn_skip_reason << reason;                            \
    MESSAGE("SKIPPED: " << cairn_skip_reason.str());        \
    ::cairn::testing::record_skip(cairn_skip_reason.str()); \
    return;                                                 \
  } while (0)
