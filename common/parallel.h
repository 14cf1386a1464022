// Runs independent pieces of work on a few threads. Hashing and copying checkpoint files
// is CPU-bound per file but independent across files (and across a large file's ranges).
#pragma once

#include <cstddef>
#include <functional>

#include "common/status.h"

namespace cairn {

// Runs fn(0) … fn(n-1) on up to `max_threads` threads (the calling one included; never
// more than the machine's cores) and returns the first failure by index, after every call
// has returned. Calls are started in index order, so callers put the longest work first.
Status for_each_in_parallel(size_t n, const std::function<Status(size_t)>& fn,
                            size_t max_threads = 4);

}  // namespace cairn
