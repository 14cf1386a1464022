// The `determined` package cairn hands to Python trials (docs/determined.md): Determined's
// Core API implemented over cairn's Python SDK, carried in the binary and written beside
// cairn.py, so that a trial's `import determined` finds it with nothing installed (the
// SDK's directory comes first on PYTHONPATH, so it shadows a pip-installed one).
#pragma once

#include <filesystem>

#include "common/status.h"

namespace cairn {

// Writes every file of the embedded package under `dir` (dir/determined/…) whose content
// differs from what is there, each atomically. Not thread-safe for one `dir`; two cairn
// processes writing the same content race harmlessly (rename replaces whole files).
Status write_determined_package(const std::filesystem::path& dir);

}  // namespace cairn
