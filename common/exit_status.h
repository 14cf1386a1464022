// The exit status with which a trial declares its failure permanent, and how builtin:mlp
// turns a Status into its exit status. Shared by the built-in trainer, which exits with it
// (trainer/mlp_main.cc), and the coordinator, which does not restart a builtin:mlp trial
// that ends with it (Coordinator::declares_permanent; docs/fault-tolerance.md).
//
// Why 2: it is the status SPEC §1 gives bad usage and bad input, and what builtin:mlp's
// permanent failures are is bad input — a hyperparameter out of range, a CSV file missing
// or malformed, a GPU it was told to use and cannot, a diverged loss (bad hyperparameters).
// Another attempt would fail the same way. Other trials may choose any status and name it in
// the config's `permanent_exit_codes` (empty by default: many programs exit 2 for failures
// that may well pass, so cairn assumes nothing of them).
#pragma once

#include "common/status.h"

namespace cairn {

inline constexpr int kPermanentFailureExit = 2;

// Whether the failure `status` describes would repeat in another attempt: something missing
// or refused (kBadInput, kNotFound), not something that may pass (kIo, kFailed, …).
inline bool is_permanent_failure(const Status& status) {
  return status.kind() == ErrorKind::kBadInput || status.kind() == ErrorKind::kNotFound;
}

// The exit status builtin:mlp ends with for `status`: 0 when ok, kPermanentFailureExit when
// the failure would repeat, else 1 (cairn restarts the trial).
inline int trial_exit_status(const Status& status) {
  if (status.ok()) return 0;
  return is_permanent_failure(status) ? kPermanentFailureExit : 1;
}

}  // namespace cairn
