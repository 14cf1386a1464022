#include "store/reproduce_workdir.h"

#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "common/file_util.h"
#include "common/sha256.h"
#include "store/schema.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

struct Entry {
  std::string path;  // relative
  struct stat st {};
};

// Every entry under `dir` (links not followed), sorted by path.
Result<std::vector<Entry>> list_tree(const fs::path& dir) {
  std::vector<Entry> entries;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    Entry e;
    e.path = it->path().lexically_relative(dir).string();
    if (::lstat(it->path().c_str(), &e.st) != 0)
      return Status::Io("cannot read " + it->path().string() + ": " + errno_text());
    entries.push_back(std::move(e));
  }
  if (ec) return Status::Io("cannot list " + dir.string() + ": " + ec.message());
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.path < b.path; });
  return entries;
}

}  // namespace

namespace {

std::string fingerprint_of(const std::vector<Entry>& entries) {
  Sha256 hash;
  for (const Entry& e : entries) {
    // A file modified in place changes its mtime and ctime (a copy that restores the mtime,
    // cp -p or rsync -t, still moves the ctime, which no user can set); one replaced changes
    // its inode; one added or removed changes the list and its directory's times.
    const std::string line =
        e.path + '\0' + std::to_string(e.st.st_mode & S_IFMT) + ' ' + std::to_string(e.st.st_size) +
        ' ' + std::to_string(e.st.st_ino) + ' ' + std::to_string(e.st.st_mtim.tv_sec) + '.' +
        std::to_string(e.st.st_mtim.tv_nsec) + ' ' + std::to_string(e.st.st_ctim.tv_sec) + '.' +
        std::to_string(e.st.st_ctim.tv_nsec) + '\n';
    hash.update(line.data(), line.size());
  }
  return hash.hex_digest();
}

}  // namespace

Result<std::string> checkout_fingerprint(const fs::path& dir) {
  auto entries = list_tree(dir);
  if (!entries.ok()) return entries.status();
  return fingerprint_of(*entries);
}

Result<RemovedWorkdir> remove_ended_reproduce_workdir(const StoreLayout& store,
                                                      const Json& experiment) {
  RemovedWorkdir out;
  const Json reproduces = experiment.value("reproduces", Json::object());
  const std::string trial = reproduces.is_object() ? reproduces.value("trial", "") : "";
  const fs::path workdir = experiment.value("workdir", "");
  if (trial.empty() || workdir.empty()) return out;
  // The checkout is .cairn/reproduce/<trial>-<n>, itself a directory, not a link to one:
  // only the parent is resolved, so a link can lead neither outside nor to a sibling.
  std::error_code ec;
  const fs::path parent = fs::weakly_canonical(workdir.parent_path(), ec);
  if (ec || parent != fs::weakly_canonical(store.reproduce(), ec) || ec) return out;
  const std::string name = workdir.filename().string();
  if (name.rfind(trial + "-", 0) != 0) return out;
  const fs::path dir = parent / name;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return out;  // gone already
  out.path = dir.string();

  if (!schema::experiment_has_ended(experiment.value("state", ""))) {
    out.kept_because = "the re-run may still run";
    return out;
  }
  const Json data = experiment.value("data", Json::object());
  if (!data.value("stored", false) && !data.value("files", Json::array()).empty()) {
    out.kept_because = "its data was too large to keep in the store";
    return out;
  }
  const std::string recorded = reproduces.value("checkout_fingerprint", "");
  auto entries = list_tree(dir);
  if (!entries.ok()) return entries.status();
  if (recorded.empty() || fingerprint_of(*entries) != recorded) {
    out.kept_because = recorded.empty()
                           ? "no record of how it was checked out"
                           : "it changed since the checkout (outputs of its trials, or edits)";
    return out;
  }
  for (const Entry& e : *entries)
    if (S_ISREG(e.st.st_mode)) out.bytes += static_cast<uint64_t>(e.st.st_size);
  fs::remove_all(dir, ec);
  if (ec) return Status::Io("cannot remove " + dir.string() + ": " + ec.message());
  return out;
}

}  // namespace cairn
