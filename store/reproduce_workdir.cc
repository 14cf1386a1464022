#include "store/reproduce_workdir.h"

#include <sys/stat.h>

#include <filesystem>

namespace cairn {
namespace fs = std::filesystem;

namespace {

bool has_ended(const std::string& state) {
  return state == "COMPLETED" || state == "ERROR" || state == "CANCELED";
}

// Sizes of the regular files under `dir`, symbolic links not followed.
uint64_t tree_bytes(const fs::path& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
      bytes += static_cast<uint64_t>(st.st_size);
  }
  return bytes;
}

}  // namespace

Result<RemovedWorkdir> remove_ended_reproduce_workdir(const StoreLayout& store,
                                                      const Json& experiment) {
  const RemovedWorkdir nothing;
  if (!experiment.contains("reproduces") || !has_ended(experiment.value("state", "")))
    return nothing;
  // Data too large to keep is reached through links in the workdir (to where the recorded
  // run read it); a later `cairn reproduce` of this re-run follows them.
  const Json data = experiment.value("data", Json::object());
  if (!data.value("stored", false) && !data.value("files", Json::array()).empty()) return nothing;
  const std::string workdir = experiment.value("workdir", "");
  if (workdir.empty()) return nothing;
  std::error_code ec;
  // Compared as resolved paths, so neither `..` nor a symbolic link can lead outside.
  const fs::path dir = fs::weakly_canonical(workdir, ec);
  if (ec) return nothing;
  const fs::path parent = fs::weakly_canonical(store.reproduce(), ec);
  if (ec || dir.parent_path() != parent) return nothing;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return nothing;  // gone already
  RemovedWorkdir removed{dir.string(), tree_bytes(dir)};
  fs::remove_all(dir, ec);
  if (ec) return Status::Io("cannot remove " + dir.string() + ": " + ec.message());
  return removed;
}

}  // namespace cairn
