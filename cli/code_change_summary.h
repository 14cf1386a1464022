// The words `cairn compare` uses for a code difference: "1 modified (train.py), 1821 added
// (checkpoints/1/…, …)". Modified files come first because an edit to the trial's own code
// is what a reader looks for; a flood of added outputs must not push it out of the list.
#pragma once

#include <string>
#include <vector>

#include "store/code_snapshot.h"

namespace cairn::cli {

// Counts and names per kind, in the order modified, added, removed; kinds without files
// are left out. At most `limit` names per kind, then "…".
std::string code_change_summary(const std::vector<FileChange>& changes, size_t limit = 8);

}  // namespace cairn::cli
