// `cairn metrics TRIAL`: a trial's metric series.
#include <iostream>
#include <set>

#include "cli/command.h"
#include "cli/csv.h"
#include "cli/experiment_view.h"
#include "cli/table.h"

namespace cairn::cli {

namespace {

Json series_json(const std::vector<MetricPoint>& points) {
  Json out = Json::array();
  for (const auto& p : points) out.push_back(Json{{"step", p.step}, {"metrics", p.metrics}});
  return out;
}

std::string cell(const Json& metrics, const std::string& name) {
  if (!metrics.contains(name)) return "";
  const Json& v = metrics[name];
  return v.is_number() ? format_number(v.get<double>()) : v.is_null() ? "nan" : v.dump();
}

int metrics(const GlobalOptions& global, const std::string& id_text, bool json, bool csv) {
  auto id = parse_id(id_text);
  if (!id.ok()) return fail(id.status());
  if (!id->trial)
    return fail(Status::BadInput("metrics needs a trial id such as " + id_text + ".1"));
  auto view = open_experiment_view(global, id->experiment);
  if (!view.ok()) return fail(view.status());
  auto trial = (*view)->trial(id->trial);
  if (!trial.ok()) return fail(trial.status());
  auto training = (*view)->metrics(id->trial, schema::MetricKind::kTraining);
  auto validation = (*view)->metrics(id->trial, schema::MetricKind::kValidation);
  if (!training.ok()) return fail(training.status());
  if (!validation.ok()) return fail(validation.status());
  if (json) {
    print_json(Json{{"trial", trial_id_text(id->experiment, id->trial)},
                    {"training", series_json(*training)},
                    {"validation", series_json(*validation)}});
    return 0;
  }
  // One row per (kind, step); the columns are every metric name seen.
  std::set<std::string> names;
  for (const auto* series : {&*training, &*validation})
    for (const auto& p : *series)
      for (const auto& [k, v] : p.metrics.items()) names.insert(k);
  std::vector<std::string> header{"kind", "step"};
  header.insert(header.end(), names.begin(), names.end());
  std::vector<std::vector<std::string>> rows;
  for (const auto& [kind, series] :
       {std::pair{"training", &*training}, std::pair{"validation", &*validation}})
    for (const auto& p : *series) {
      std::vector<std::string> row{kind, std::to_string(p.step)};
      for (const auto& n : names) row.push_back(cell(p.metrics, n));
      rows.push_back(std::move(row));
    }
  if (csv) {
    std::cout << csv_record(header);
    for (const auto& r : rows) std::cout << csv_record(r);
    return 0;
  }
  Table table(header);
  for (auto& r : rows) table.add(std::move(r));
  table.print(std::cout);
  return 0;
}

}  // namespace

void add_metrics(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto csv = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("metrics", "Print a trial's metric series");
  cmd->add_option("trial", *id, "Trial id (7.3)")->required()->type_name("TRIAL");
  auto* j = cmd->add_flag("--json", *json, "Print JSON");
  cmd->add_flag("--csv", *csv, "Print CSV")->excludes(j);
  cmd->callback([&global, &outcome, id, json, csv] {
    outcome.exit_code = metrics(global, *id, *json, *csv);
  });
}

}  // namespace cairn::cli
