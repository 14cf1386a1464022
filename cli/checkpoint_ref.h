// Resolving what the user calls a checkpoint: a short content hash ("ab12…", unique prefix
// of at least 4 hex digits), or `7.3@latest` / `7.3@best`.
#pragma once

#include <string>

#include "cli/command.h"

namespace cairn::cli {

struct ResolvedCheckpoint {
  int64_t experiment = 0;
  Json record;  // the stored checkpoint record
};

Result<ResolvedCheckpoint> resolve_checkpoint(const StoreLayout& store, const std::string& ref);

}  // namespace cairn::cli
