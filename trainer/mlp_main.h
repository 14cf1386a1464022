// Entry point of `entrypoint: builtin:mlp`: the trial process cairn re-executes itself as.
#pragma once

namespace cairn {

// Runs the built-in trainer under the trial contract (SPEC §4) through the C++ SDK.
// Returns the process exit status: 0 when the searcher has no more work or the trial was
// asked to stop (after checkpointing), 2 for bad hyperparameters, a bad dataset or
// divergence (a non-finite loss), 1 for anything else. Errors go to stderr as one line,
// "cairn: error: builtin:mlp: …".
int run_builtin_mlp();

}  // namespace cairn
