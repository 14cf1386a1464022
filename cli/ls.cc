// `cairn ls`: list experiments.
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "cli/table.h"

namespace cairn::cli {

namespace {

int ls(const GlobalOptions& global, bool all, bool json) {
  auto store = open_store(global);
  if (!store.ok()) return fail(store.status());
  Json out = Json::array();
  int exit_code = 0;
  // An experiment being created right now has no database or record yet: not listed. One
  // that cannot be read is named on stderr, with a failing exit status: left out silently,
  // a damaged experiment would look deleted.
  auto unreadable = [&](const Status& st) {
    if (st.kind() != ErrorKind::kNotFound) exit_code = fail(st);
  };
  for (int64_t id : list_experiment_ids(*store)) {
    auto reader = ExperimentReader::open(*store, id);
    if (!reader.ok()) {
      unreadable(reader.status());
      continue;
    }
    auto exp = (*reader)->experiment();
    if (!exp.ok()) {
      unreadable(exp.status());
      continue;
    }
    const std::string state = exp->value("state", "");
    if (!all && state == "CANCELED") continue;
    auto trials = (*reader)->trials();
    Json row{{"id", id},
             {"name", exp->value("name", "")},
             {"state", state},
             {"trials", trials.ok() ? trials->size() : 0},
             {"best_trial", Json(nullptr)},
             {"searcher", exp->value("searcher", "")},
             {"created_at", exp->value("created_at", Json(nullptr))}};
    // Computed from the trials, as `best` does: the same answer while it runs and after.
    if (trials.ok())
      if (const Json* best = best_trial_record(*exp, *trials)) row["best_trial"] = (*best)["id"];
    if (state == "ACTIVE" && !experiment_is_driven(store->experiment(id))) row["state"] = "ACTIVE";
    out.push_back(std::move(row));
  }
  if (json) {
    print_json(out);
    return exit_code;
  }
  Table table({"ID", "NAME", "STATE", "SEARCHER", "TRIALS", "BEST"});
  for (const Json& row : out)
    table.add({row["id"].dump(), row["name"].get<std::string>(), row["state"].get<std::string>(),
               row["searcher"].get<std::string>(), row["trials"].dump(),
               row["best_trial"].is_string() ? row["best_trial"].get<std::string>() : "-"});
  table.print(std::cout);
  return exit_code;
}

}  // namespace

void add_ls(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto all = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("ls", "List experiments");
  cmd->add_flag("--all", *all, "Include canceled experiments");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([&global, &outcome, all, json] { outcome.exit_code = ls(global, *all, *json); });
}

}  // namespace cairn::cli
