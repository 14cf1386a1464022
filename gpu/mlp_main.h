// The built-in trainer's process entry point: `cairn __builtin-mlp`, started by the
// coordinator like any other trial (SPEC §6). Speaks to cairn through the C++ SDK.
#pragma once

namespace cairn {

// Returns the process exit status: 0 done (or paused), 2 bad hyperparameters, 1 failure.
int run_builtin_mlp();

}  // namespace cairn
