// A trial named on the command line, with what `compare` and `reproduce` need of it: its
// experiment's record (config, code snapshot, fingerprints), its own record and its metric
// series.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "store/experiment_reader.h"
#include "store/store_location.h"

namespace cairn::cli {

struct TrialRef {
  std::string id;   // "7.3"
  Json experiment;  // the experiment record
  Json trial;       // the trial record
  std::vector<MetricPoint> training, validation;
  std::vector<int64_t> train_lengths;  // the lengths the searcher asked for, in order
};

// `text` is a trial id ("7.3") or an experiment id ("7": its best trial, or its first when
// none has validated yet).
Result<TrialRef> load_trial_ref(const StoreLayout& store, const std::string& text);

}  // namespace cairn::cli
