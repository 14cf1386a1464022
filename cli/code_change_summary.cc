#include "cli/code_change_summary.h"

namespace cairn::cli {

std::string code_change_summary(const std::vector<FileChange>& changes, size_t limit) {
  std::string out;
  for (const auto& [kind, word] : {std::pair{'M', "modified"}, {'A', "added"}, {'D', "removed"}}) {
    size_t count = 0;
    std::string names;
    for (const FileChange& c : changes) {
      // Anything not added or removed is a modification (content, mode or type).
      const char k = c.kind == 'A' || c.kind == 'D' ? c.kind : 'M';
      if (k != kind) continue;
      if (count < limit) names += (count ? ", " : "") + c.path;
      if (count == limit) names += ", …";
      ++count;
    }
    if (count == 0) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(count) + " " + word + " (" + names + ")";
  }
  return out;
}

}  // namespace cairn::cli
