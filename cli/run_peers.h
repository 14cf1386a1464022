// `cairn run --peers`: checked before an experiment is created, so that a wrong key, an
// agent of another version or one that does not answer leaves nothing behind.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace cairn::cli {

// The agents of --peers (empty when not given), once the first has answered a status
// request with our key and version (bounded: 10 s). One agent only for now: placement over
// several machines is not built (docs/peers.md), so a longer list is refused rather than
// half-used.
Result<std::vector<std::string>> check_run_peers(const std::string& peers,
                                                 const std::string& key_file);

}  // namespace cairn::cli
