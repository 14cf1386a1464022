#include "cli/code_change_summary.h"

#include "cli/table.h"

namespace cairn::cli {

std::string code_change_summary(const std::vector<FileChange>& changes, size_t limit) {
  if (changes.empty()) return "";
  std::vector<std::string> names;
  std::string counts;
  size_t modified = 0;
  for (const auto& [kind, word] : {std::pair{'M', "modified"}, {'A', "added"}, {'D', "removed"}}) {
    size_t count = 0;
    for (const FileChange& c : changes) {
      // Anything not added or removed is a modification (content, mode or type).
      const char k = c.kind == 'A' || c.kind == 'D' ? c.kind : 'M';
      if (k != kind) continue;
      names.push_back(c.path);
      ++count;
    }
    if (kind == 'M') modified = count;
    if (count > 0) counts += (counts.empty() ? "" : ", ") + std::to_string(count) + " " + word;
  }
  const bool all_modified = modified == changes.size();
  return std::to_string(names.size()) + " file" + (names.size() == 1 ? "" : "s") + " changed (" +
         name_list(names, limit) + ")" + (all_modified ? "" : ": " + counts);
}

}  // namespace cairn::cli
