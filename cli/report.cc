// `cairn report EXP... -o FILE.html`: the experiments as one self-contained HTML page
// (cli/report_html.h), written atomically: a reader never sees half a report.
#include <algorithm>
#include <iostream>

#include "cli/command.h"
#include "cli/experiment_view.h"
#include "cli/report_html.h"
#include "common/file_util.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

// One experiment's record and trials with their metrics.
Result<ReportExperiment> read_experiment(const GlobalOptions& global, int64_t id) {
  auto view = open_experiment_view(global, id);
  if (!view.ok()) return view.status();
  auto exp = (*view)->experiment();
  if (!exp.ok()) return exp.status();
  auto records = (*view)->trials();
  if (!records.ok()) return records.status();
  ReportExperiment out{std::move(*exp), {}};
  for (Json& record : *records) {
    const int64_t index = record.value("index", int64_t{0});
    auto training = (*view)->metrics(index, schema::MetricKind::kTraining);
    if (!training.ok()) return training.status();
    auto validation = (*view)->metrics(index, schema::MetricKind::kValidation);
    if (!validation.ok()) return validation.status();
    out.trials.push_back({std::move(record), std::move(*training), std::move(*validation)});
  }
  return out;
}

int report(const GlobalOptions& global, const std::vector<std::string>& id_texts,
           const std::string& output) {
  std::vector<int64_t> ids;
  for (const std::string& text : id_texts) {
    auto id = parse_id(text);
    if (!id.ok()) return fail(id.status());
    if (id->trial) return fail(Status::BadInput("report needs an experiment id, not a trial"));
    if (std::find(ids.begin(), ids.end(), id->experiment) != ids.end())
      return fail(Status::BadInput("experiment " + text + " is named twice"));
    ids.push_back(id->experiment);
  }
  if (output.empty()) return fail(Status::BadInput("-o: the file to write is empty"));
  std::error_code ec;
  if (fs::is_directory(output, ec))
    return fail(Status::BadInput("-o " + output + ": is a directory; name the file to write"));
  const fs::path parent = fs::path(output).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return fail(Status::BadInput("-o " + output + ": there is no directory " + parent.string()));
  std::vector<ReportExperiment> experiments;
  for (int64_t id : ids) {
    auto exp = read_experiment(global, id);
    if (!exp.ok()) return fail(exp.status());
    experiments.push_back(std::move(*exp));
  }
  Status written = write_file_atomic(output, render_report_html(experiments));
  if (!written.ok()) return fail(written);
  return 0;
}

}  // namespace

void add_report(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto ids = std::make_shared<std::vector<std::string>>();
  auto output = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("report",
                         "Write experiments as one self-contained HTML file: learning curves, "
                         "hyperparameter plots and importance, brackets, trial table");
  cmd->add_option("ids", *ids, "Experiment ids; several are drawn on shared axes")
      ->required()
      ->type_name("EXP...");
  cmd->add_option("-o,--output", *output, "The HTML file to write (replaced if it exists)")
      ->required()
      ->type_name("FILE.html");
  cmd->callback(
      [&global, &outcome, ids, output] { outcome.exit_code = report(global, *ids, *output); });
}

}  // namespace cairn::cli
