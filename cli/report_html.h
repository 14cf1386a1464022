// `cairn report`'s page: one self-contained HTML file (no scripts, styles or images from
// elsewhere; the charts are inline SVG, hover through SVG <title>s), so it can be mailed,
// archived or opened offline. man/cairn.1 (`cairn report`) describes what it shows.
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

struct ReportExperiment {
  Json experiment;  // its stored record (config, searcher_state, …)
  std::vector<ReportTrial> trials;
};

// The page for one or more experiments, drawn on shared axes (the first experiment's
// metric): a summary, learning curves (every validation a point naming its trial and step,
// the best trial marked), the metric against each hyperparameter that varies (log axes for
// `log` hyperparameters and for metrics spanning decades, cli/report_axis.h), a
// parallel-coordinates view, the importance of each hyperparameter with its method
// (cli/report_importance.h), Hyperband/ASHA brackets and rungs, a pbt search's lineage
// (cli/report_lineage.h), and the trial table.
std::string render_report_html(const std::vector<ReportExperiment>& experiments);
std::string render_report_html(const Json& experiment, const std::vector<ReportTrial>& trials);

// `text` with &, <, >, " and ' escaped, for HTML text and attribute values. Public for tests.
std::string html_escape(const std::string& text);

}  // namespace cairn::cli
