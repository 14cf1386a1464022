// `cairn report`'s page: one self-contained HTML file (no scripts, styles or images from
// elsewhere; the charts are inline SVG), so it can be mailed, archived or opened offline.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "store/experiment_reader.h"

namespace cairn::cli {

struct ReportTrial {
  Json record;  // the trial's stored record: id, state, hparams, steps_completed, restarts
  std::vector<MetricPoint> training;
  std::vector<MetricPoint> validation;
};

// The page for `experiment` (its stored record) and its trials: a summary, the learning
// curves (the searcher's metric at each validation, and the training loss), one plot of
// the searcher's metric against each hyperparameter that varies, and the trial table.
std::string render_report_html(const Json& experiment, const std::vector<ReportTrial>& trials);

// `text` with &, <, >, " and ' escaped, for HTML text and attribute values. Public for tests.
std::string html_escape(const std::string& text);

}  // namespace cairn::cli
