#include "peer/kept_scans.h"

namespace cairn {

ScanCache KeptScans::of(const std::string& dir) {
  std::lock_guard lock(mutex_);
  auto it = kept_.find(dir);
  return it == kept_.end() ? ScanCache{} : it->second.cache;
}

void KeptScans::keep(const std::string& dir, ScanCache cache) {
  std::lock_guard lock(mutex_);
  kept_[dir] = {std::move(cache), ++clock_};
  while (kept_.size() > most_) {
    auto oldest = kept_.begin();
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->second.listed < oldest->second.listed) oldest = it;
    kept_.erase(oldest);
  }
}

void KeptScans::forget(const std::string& dir) {
  std::lock_guard lock(mutex_);
  kept_.erase(dir);
}

std::string kept_digests_text(size_t reused) {
  if (reused == 0) return "";
  return ", " + std::to_string(reused) + (reused == 1 ? " digest" : " digests") +
         " kept from an earlier listing";
}

Result<WireManifest> scan_again(KeptScans& scans, const std::filesystem::path& dir,
                                ScanCounts* counts) {
  ScanCache cache = scans.of(dir.string());
  auto manifest = scan_checkpoint_dir(dir, cache, counts);
  if (manifest.ok()) scans.keep(dir.string(), std::move(cache));
  return manifest;
}

}  // namespace cairn
