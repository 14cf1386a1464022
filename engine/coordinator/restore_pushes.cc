#include "engine/coordinator/restore_pushes.h"

namespace cairn {

Result<WireManifest> scan_for_restore(const std::string& trial, int64_t attempt,
                                      const std::filesystem::path& dir) {
  // Every agent's launcher of this process shares it: a restore spans machines.
  static OncePerRestore<WireManifest> scans;
  return scans.get(trial, attempt, dir.string(), [&] { return scan_checkpoint_dir(dir); });
}

}  // namespace cairn
