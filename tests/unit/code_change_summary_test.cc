#include "cli/code_change_summary.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using cairn::FileChange;
using cairn::cli::code_change_summary;

TEST_CASE("a code summary names modified files first, with a count per kind") {
  // git's order: by path, so the many added checkpoint files come before train.py.
  std::vector<FileChange> changes;
  for (int i = 1; i <= 20; ++i) changes.push_back({"checkpoints/" + std::to_string(i) + "/w", 'A'});
  changes.push_back({"old.py", 'D'});
  changes.push_back({"train.py", 'M'});
  CHECK(code_change_summary(changes, 2) ==
        "1 modified (train.py), 20 added (checkpoints/1/w, checkpoints/2/w, …), 1 removed "
        "(old.py)");
}

TEST_CASE("a code summary leaves out kinds without files and lists up to the limit") {
  CHECK(code_change_summary({{"a.py", 'M'}, {"b.py", 'M'}}) == "2 modified (a.py, b.py)");
  CHECK(code_change_summary({{"new.py", 'A'}}) == "1 added (new.py)");
  CHECK(code_change_summary({{"a", 'A'}, {"b", 'A'}, {"c", 'A'}}, 3) == "3 added (a, b, c)");
  CHECK(code_change_summary({}) == "");
}
