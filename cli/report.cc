// `cairn report EXP -o FILE.html`: the experiment as one self-contained HTML page
// (cli/report_html.h), written atomically: a reader never sees half a report.
#include <iostream>

#include "cli/command.h"
#include "cli/experiment_view.h"
#include "cli/report_html.h"
#include "common/file_util.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

int report(const GlobalOptions& global, const std::string& id_text, const std::string& output) {
  auto id = parse_id(id_text);
  if (!id.ok()) return fail(id.status());
  if (id->trial) return fail(Status::BadInput("report needs an experiment id, not a trial"));
  if (output.empty()) return fail(Status::BadInput("-o: the file to write is empty"));
  std::error_code ec;
  if (fs::is_directory(output, ec))
    return fail(Status::BadInput("-o " + output + ": is a directory; name the file to write"));
  const fs::path parent = fs::path(output).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return fail(Status::BadInput("-o " + output + ": there is no directory " + parent.string()));
  auto view = open_experiment_view(global, id->experiment);
  if (!view.ok()) return fail(view.status());
  auto exp = (*view)->experiment();
  if (!exp.ok()) return fail(exp.status());
  auto records = (*view)->trials();
  if (!records.ok()) return fail(records.status());
  std::vector<ReportTrial> trials;
  for (Json& record : *records) {
    const int64_t index = record.value("index", int64_t{0});
    auto training = (*view)->metrics(index, schema::MetricKind::kTraining);
    if (!training.ok()) return fail(training.status());
    auto validation = (*view)->metrics(index, schema::MetricKind::kValidation);
    if (!validation.ok()) return fail(validation.status());
    trials.push_back({std::move(record), std::move(*training), std::move(*validation)});
  }
  Status written = write_file_atomic(output, render_report_html(*exp, trials));
  if (!written.ok()) return fail(written);
  return 0;
}

}  // namespace

void add_report(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("report",
                         "Write an experiment as one self-contained HTML file: learning curves, "
                         "hyperparameter-vs-metric plots, trial table");
  cmd->add_option("id", *id, "Experiment id")->required()->type_name("EXP");
  cmd->add_option("-o,--output", *output, "The HTML file to write (replaced if it exists)")
      ->required()
      ->type_name("FILE.html");
  cmd->callback(
      [&global, &outcome, id, output] { outcome.exit_code = report(global, *id, *output); });
}

}  // namespace cairn::cli
