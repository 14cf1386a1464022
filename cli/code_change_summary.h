// The words `cairn compare` uses for a code difference, as SPEC's "code: 2 files changed
// (train.py, model.py)", with modified files named first: an edit to the trial's own code
// is what a reader looks for, and a flood of added outputs (git lists by path) must not
// push it out of the list. When not every file was modified, the kinds are counted after:
// "22 files changed (train.py, checkpoints/1/w and 20 more): 1 modified, 20 added, 1 removed".
#pragma once

#include <string>
#include <vector>

#include "store/code_snapshot.h"

namespace cairn::cli {

// At most `limit` names, then how many more (name_list); "" when nothing changed.
std::string code_change_summary(const std::vector<FileChange>& changes, size_t limit = 8);

}  // namespace cairn::cli
