// Where the cluster key is looked for, on the agent and on the coordinator side alike:
// `--key-file F`, else $CAIRN_KEY_FILE, else $XDG_CONFIG_HOME/cairn/cluster.key, else
// ~/.config/cairn/cluster.key. An explicit file (option or variable) must exist; the
// default one may be missing, which means "no key" (cluster_key.h).
//
// Thread-safety: reads the environment; call before starting threads.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "common/status.h"
#include "peer/cluster_key.h"

namespace cairn {

// The default key file ($XDG_CONFIG_HOME or ~/.config), or nullopt without either.
std::optional<std::filesystem::path> default_key_file();

// The key to use. `option` is --key-file's value (empty: not given). A missing explicit
// file is an error (kNotFound); a missing default file gives no_cluster_key(). `source`, when
// given, is set to the file the key came from (empty for no key).
Result<ClusterKey> find_cluster_key(const std::string& option,
                                    std::filesystem::path* source = nullptr);

}  // namespace cairn
