#include "peer/key_location.h"

#include <cstdlib>

namespace cairn {

std::optional<std::filesystem::path> default_key_file() {
  const char* config = std::getenv("XDG_CONFIG_HOME");
  if (config && *config == '/') return std::filesystem::path(config) / "cairn" / "cluster.key";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::filesystem::path(home) / ".config" / "cairn" / "cluster.key";
  return std::nullopt;
}

Result<ClusterKey> find_cluster_key(const std::string& option, std::filesystem::path* source) {
  if (source) source->clear();
  std::filesystem::path file;
  bool explicit_file = true;
  if (!option.empty()) {
    file = option;
  } else if (const char* env = std::getenv("CAIRN_KEY_FILE"); env && *env) {
    file = env;
  } else if (auto fallback = default_key_file()) {
    file = *fallback;
    explicit_file = false;
  } else {
    return no_cluster_key();
  }
  auto key = load_cluster_key(file);
  if (!key.ok()) {
    if (key.status().kind() == ErrorKind::kNotFound && !explicit_file) return no_cluster_key();
    return key.status();
  }
  if (source) *source = file;
  return key;
}

}  // namespace cairn
