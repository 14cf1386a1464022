// Store-wide trial numbers: every trial of every experiment in one store gets its own
// integer, 1, 2, 3, … in the order trials first start. cairn's own trial ids ("7.3") are
// what users type; the number is for tools that need an integer id (the `determined`
// package's trial_id, as Determined's scripts store it in checkpoints: docs/determined.md).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "store/store_location.h"

namespace cairn {

// The next number, from `.cairn/trial_numbers` (the last number handed out, as text),
// under an exclusive flock of that file so that two `cairn run`s on one store never get
// the same number; the file is fsynced before the number is returned. A number may be
// skipped (a coordinator that dies before storing it), never repeated.
Result<int64_t> allocate_trial_number(const StoreLayout& store);

}  // namespace cairn
