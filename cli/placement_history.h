// Where a trial's ranks ran, attempt by attempt (issue 17 item 4: `show` says where every rank
// ran). The trial record holds the latest attempt's placement; every start of an attempt is in
// the event log as a trial_started event with the placement it had, so the earlier ones are
// read from there.
//
// Thread-safety: functions of their arguments only.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "store/experiment_reader.h"

namespace cairn::cli {

// [{"attempt": 1, "placement": [{"rank", "machine", …}, …]}, …]: one entry per start of the
// trial that recorded a placement, in order; attempts numbered from 1 in that order.
Result<Json> placement_history(const ExperimentReader& reader, int64_t trial);

// "local", or per rank when the ranks ran on several machines or there are several:
// "0: local, 1: gpu2:7070". "?" for what a record lacks.
std::string placement_text(const Json& placement);

}  // namespace cairn::cli
