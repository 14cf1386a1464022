// `cairn checkpoints ID`: the checkpoints of an experiment or a trial.
#include <iostream>

#include "cli/command.h"
#include "cli/experiment_view.h"
#include "cli/table.h"
#include "store/schema.h"

namespace cairn::cli {

namespace {

int checkpoints(const GlobalOptions& global, const std::string& id_text, bool json) {
  auto id = parse_id(id_text);
  if (!id.ok()) return fail(id.status());
  auto view = open_experiment_view(global, id->experiment);
  if (!view.ok()) return fail(view.status());
  if (id->trial) {
    auto trial = (*view)->trial(id->trial);
    if (!trial.ok()) return fail(trial.status());
  }
  auto ckpts = (*view)->checkpoints(id->trial);
  if (!ckpts.ok()) return fail(ckpts.status());
  Json out = Json::array();
  for (const Json& c : *ckpts)
    if (schema::checkpoint_is_kept(c)) out.push_back(checkpoint_json(c));
  if (json) {
    print_json(out);
    return 0;
  }
  Table table({"CHECKPOINT", "TRIAL", "STEPS", "BYTES", "METRICS"});
  for (const Json& c : out) {
    std::string metrics;
    for (const auto& [k, v] : c["metrics"].items())
      metrics += (metrics.empty() ? "" : " ") + k + "=" +
                 (v.is_number() ? format_number(v.get<double>()) : v.dump());
    table.add({c["id"].get<std::string>().substr(0, 12), c["trial"].get<std::string>(),
               c["steps_completed"].dump(), c["bytes"].dump(), metrics.empty() ? "-" : metrics});
  }
  table.print(std::cout);
  return 0;
}

}  // namespace

void add_checkpoints(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("checkpoints", "List the checkpoints of an experiment or a trial");
  cmd->add_option("id", *id, "Experiment or trial id")->required()->type_name("ID");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback(
      [&global, &outcome, id, json] { outcome.exit_code = checkpoints(global, *id, *json); });
}

}  // namespace cairn::cli
