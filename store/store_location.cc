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
constexpr size_t kMaxIdDigits = 12;

Result<StoreLayout> open_existing(const fs::path& dotcairn) {
  std::error_code ec;
  if (!fs::is_directory(dotcairn, ec))
    return Status::NotFound("no cairn store at " + dotcairn.string());
  auto format = read_file(dotcairn / kFormatFile);
  // Another version's store is not damage: say which format it is, so the fix is plain.
  if (format.ok() && *format != kFormat && format->starts_with("cairn-store ")) {
    std::string version = format->substr(0, format->find('\n'));
    return Status::Failed(dotcairn.string() + " is a store of another cairn version (its " +
                          kFormatFile + " says '" + version.substr(0, 40) +
                          "'; this cairn reads 'cairn-store 1')");
  }
  if (!format.ok() || *format != kFormat)
    return Status::Corrupt(dotcairn.string() + " is not a cairn store (missing or unknown " +
                           kFormatFile + ")");
  return StoreLayout(dotcairn);
}

// The directories directly inside `dir` that hold a store, sorted (at most a few hundred
// entries are looked at: this only decorates an error message).
std::vector<std::string> stores_just_below(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (int seen = 0; !ec && it != end && seen < 500; it.increment(ec), ++seen) {
    std::error_code ignored;
    if (it->is_directory(ignored) && fs::exists(it->path() / ".cairn" / kFormatFile, ignored))
      found.push_back(it->path().filename().string());
  }
  std::sort(found.begin(), found.end());
  return found;
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
  std::string message =
      "no cairn store (.cairn/) in " + fs::absolute(start).string() + " or any parent directory";
  // `cairn run sub/config.yaml` makes its store next to the config, in sub/: name it, since
  // the command that follows is usually typed in the directory the run was started from.
  const std::vector<std::string> below = stores_just_below(start);
  if (below.size() == 1)
    message += "; there is one in " + below[0] + "/: `cd " + below[0] + "` or `--store " +
               below[0] + "/.cairn`";
  else if (!below.empty())
    message += "; there are some in subdirectories (" + below[0] + "/, " + below[1] +
               (below.size() > 2 ? "/, …" : "/") + "): cd into one, or --store DIR";
  else
    message += "; `cairn init` or `cairn run CONFIG.yaml` makes one";
  return Status::NotFound(message);
}

namespace {

// Makes the store's directories and files under `root`, keeping what is there.
Status fill_store(const fs::path& root) {
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
    return Status::Ok();
  }
  // A store inside a user's git checkout must not show up in `git status` (SPEC §5: the
  // user's repository is never touched, and that includes what it reports).
  Status st = write_file_atomic(root / ".gitignore", "# the cairn store: never versioned\n*\n");
  if (!st.ok()) return st;
  return write_file_atomic(root / kFormatFile, kFormat);
}

}  // namespace

Result<StoreLayout> init_store(const fs::path& dir) {
  fs::path abs = fs::absolute(dir).lexically_normal();
  if (abs.filename().empty()) abs = abs.parent_path();
  fs::path root = abs.filename() == ".cairn" ? abs : abs / ".cairn";
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    // A new store appears whole, FORMAT included: it is made beside and renamed into place.
    // Made in place, a second `cairn run` (or an `ls`) in the same project at that moment
    // found `.cairn/` without FORMAT and failed ("not a cairn store"). When another process
    // wins the race, the rename fails (its store is not empty) and its store is used.
    fs::create_directories(root.parent_path(), ec);
    auto fresh = make_unique_dir(root.parent_path(), ".cairn-new-");
    if (!fresh.ok()) return fresh.status();
    Status st = fill_store(*fresh);
    if (st.ok() && ::rename(fresh->c_str(), root.c_str()) == 0) {
      (void)fsync_dir(root.parent_path());
      return StoreLayout(root);
    }
    fs::remove_all(*fresh, ec);
    if (!st.ok()) return st;
  }
  if (Status st = fill_store(root); !st.ok()) return st;
  return StoreLayout(root);
}

std::vector<int64_t> list_experiment_ids(const StoreLayout& store) {
  std::vector<int64_t> ids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(store.experiments(), ec)) {
    const std::string name = entry.path().filename().string();
    // Ids have at most 12 digits, as on the command line (cli parse_id): a stray longer name
    // overflowed stoll here, or made the next id wrap to a negative number.
    if (name.empty() || name.size() > kMaxIdDigits ||
        !std::all_of(name.begin(), name.end(), ::isdigit))
      continue;
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
