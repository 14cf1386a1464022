#include "engine/coordinator/store_links.h"

#include "common/file_util.h"

namespace cairn {
namespace fs = std::filesystem;

fs::path resolve_parents(const fs::path& path, std::error_code& ec) {
  const fs::path name = path.filename();
  if (name.empty() || name == "." || name == "..") return fs::weakly_canonical(path, ec);
  return fs::weakly_canonical(path.parent_path(), ec) / name;
}

fs::path through_store_links(const fs::path& store_root, fs::path to) {
  constexpr int kMaxSteps = 40;  // as the kernel's own limit on a chain: a loop ends here
  for (int step = 0; step < kMaxSteps && lies_inside(to, store_root); ++step) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(to, ec))) break;
    fs::path next = fs::read_symlink(to, ec);
    if (ec) break;
    if (next.is_relative()) next = to.parent_path() / next;
    next = resolve_parents(next, ec);
    if (ec) break;
    to = std::move(next);
  }
  return to;
}

}  // namespace cairn
