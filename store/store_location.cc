#include "store/store_location.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/file_util.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormatFile = "FORMAT";
constexpr const char* kFormat = "cairn-store 1\n";

Result<StoreLayout> open_existing(const fs::path& dotcairn) {
  std::error_code ec;
  if (!fs::is_directory(dotcairn, ec))
    return Status::NotFound("no cairn store at " + dotcairn.string());
  auto format = read_file(dotcairn / kFormatFile);
  if (!format.ok() || *format != kFormat)
    return Status::Corrupt(dotcairn.string() + " is not a cairn store (missing or unknown " +
                           kFormatFile + ")");
  return StoreLayout(dotcairn);
}

}  // namespace

Result<StoreLayout> find_store(const std::optional<fs::path>& explicit_dir, const fs::path& start) {
  std::optional<fs::path> dir = explicit_dir;
  if (!dir) {
    if (const char* env = std::getenv("CAIRN_DIR"); env && *env) dir = fs::path(env);
  }
  if (dir) {
    fs::path abs = fs::absolute(*dir).lexically_normal();
    if (abs.filename().empty()) abs = abs.parent_path();
    if (abs.filename() == ".cairn") return open_existing(abs);
    return open_existing(abs / ".cairn");
  }
  fs::path cur = fs::absolute(start).lexically_normal();
  for (;;) {
    std::error_code ec;
    if (fs::is_directory(cur / ".cairn", ec)) return open_existing(cur / ".cairn");
    if (!cur.has_parent_path() || cur.parent_path() == cur) break;
    cur = cur.parent_path();
  }
  return Status::NotFound("no cairn store (.cairn/) in " + fs::absolute(start).string() +
                          " or any parent directory");
}

Result<StoreLayout> init_store(const fs::path& dir) {
  fs::path abs = fs::absolute(dir).lexically_normal();
  if (abs.filename().empty()) abs = abs.parent_path();
  fs::path root = abs.filename() == ".cairn" ? abs : abs / ".cairn";
  StoreLayout layout(root);
  std::error_code ec;
  for (const fs::path& p : {root, layout.experiments(), layout.objects(), layout.staging(),
                            layout.tmp(), layout.sdk()}) {
    fs::create_directories(p, ec);
    if (ec) return Status::Io("cannot create " + p.string() + ": " + ec.message());
  }
  auto existing = read_file(root / kFormatFile);
  if (existing.ok()) {
    if (*existing != kFormat)
      return Status::Corrupt(root.string() + " holds a store of an unknown format");
    return layout;
  }
  // A store inside a user's git checkout must not show up in `git status` (SPEC §5: the
  // user's repository is never touched, and that includes what it reports).
  Status st = write_file_atomic(root / ".gitignore", "# the cairn store: never versioned\n*\n");
  if (!st.ok()) return st;
  st = write_file_atomic(root / kFormatFile, kFormat);
  if (!st.ok()) return st;
  return layout;
}

std::vector<int64_t> list_experiment_ids(const StoreLayout& store) {
  std::vector<int64_t> ids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(store.experiments(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    ids.push_back(std::stoll(name));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<int64_t> allocate_experiment_id(const StoreLayout& store) {
  std::vector<int64_t> ids = list_experiment_ids(store);
  int64_t next = ids.empty() ? 1 : ids.back() + 1;
  for (int attempt = 0; attempt < 1000; ++attempt, ++next) {
    fs::path dir = store.experiment(next);
    if (::mkdir(dir.c_str(), 0755) == 0) {
      Status st = fsync_dir(store.experiments());
      if (!st.ok()) return st;
      return next;
    }
    if (errno != EEXIST) return Status::Io("cannot create " + dir.string() + ": " + errno_text());
  }
  return Status::Io("cannot allocate an experiment id in " + store.experiments().string());
}

}  // namespace cairn
