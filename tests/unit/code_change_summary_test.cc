#include "cli/code_change_summary.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using cairn::FileChange;
using cairn::cli::code_change_summary;

TEST_CASE("a code summary names modified files first, then counts each kind") {
  // git's order: by path, so the many added checkpoint files come before train.py.
  std::vector<FileChange> changes;
  for (int i = 1; i <= 20; ++i) changes.push_back({"checkpoints/" + std::to_string(i) + "/w", 'A'});
  changes.push_back({"old.py", 'D'});
  changes.push_back({"train.py", 'M'});
  CHECK(code_change_summary(changes, 2) ==
        "22 files changed (train.py, checkpoints/1/w and 20 more): 1 modified, 20 added, "
        "1 removed");
}

TEST_CASE("a code summary of modified files only reads as SPEC's, and lists up to the limit") {
  CHECK(code_change_summary({{"a.py", 'M'}, {"b.py", 'M'}}) == "2 files changed (a.py, b.py)");
  CHECK(code_change_summary({{"new.py", 'A'}}) == "1 file changed (new.py): 1 added");
  CHECK(code_change_summary({{"a", 'A'}, {"b", 'A'}, {"c", 'A'}}, 3) ==
        "3 files changed (a, b, c): 3 added");
  CHECK(code_change_summary({}) == "");
}
