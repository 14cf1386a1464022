// `cairn show ID`: an experiment or a trial.
#include <iostream>

#include "cli/command.h"
#include "cli/experiment_view.h"
#include "cli/notify_redaction.h"
#include "cli/placement_history.h"
#include "cli/search_view.h"
#include "cli/table.h"
#include "common/metric_order.h"
#include "engine/coordinator/trial_blas_core.h"
#include "store/data_fingerprint.h"
#include "store/schema.h"
#include "trainer/blas_core_type.h"

namespace cairn::cli {

namespace {

std::string metrics_text(const Json& metrics) {
  if (!metrics.is_object() || metrics.empty()) return "-";
  std::string out;
  for (const auto& [k, v] : metrics.items()) {
    if (!out.empty()) out += " ";
    out += k + "=" + (v.is_number() ? format_number(v.get<double>()) : v.dump());
  }
  return out;
}

// "Cooperlake kernels (chosen by cairn: …)" from a trial record's "blas_core".
std::string blas_core_text(const Json& trial) {
  const std::string name = blas_core_field(trial, "core");
  const std::string own = blas_core_field(trial, "openblas_own");
  const std::string cpu = blas_core_field(trial, "cpu");
  std::string from = blas_core_field(trial, "from");
  std::string why;
  switch (blas::parse_source(blas_core_field(trial, "chosen_by"))
              .value_or(blas::CoreSource::kOpenblas)) {
    case blas::CoreSource::kCairn:
      why = "chosen by cairn: the newest this CPU supports (" + cpu + ")" +
            (own.empty() ? "" : "; OpenBLAS alone runs " + own + "'s");
      break;
    case blas::CoreSource::kOpenblas:
      why = "OpenBLAS's own choice, as new as this CPU supports (" + cpu + ")";
      break;
    case blas::CoreSource::kUser:
      why = "OPENBLAS_CORETYPE set by the user";
      break;
    case blas::CoreSource::kDeterministic:
      why = "pinned by deterministic: true";
      break;
    case blas::CoreSource::kRecorded:
      why = "as trial " + (from.empty() ? "?" : from) + " ran them (deterministic: true)";
      break;
  }
  return "OpenBLAS " + name + " kernels (" + why + ")";
}

std::string hparams_text(const Json& hparams) {
  if (!hparams.is_object() || hparams.empty()) return "-";
  std::string out;
  for (const auto& [k, v] : hparams.items()) {
    if (!out.empty()) out += " ";
    out += k + "=" +
           (v.is_number_float() ? format_number(v.get<double>())
            : v.is_string()     ? v.get<std::string>()
                                : v.dump());
  }
  return out;
}

Json experiment_json(const Json& exp, const std::vector<Json>& trials) {
  Json out{{"id", exp.value("id", 0)},
           {"name", exp.value("name", "")},
           {"state", exp.value("state", "")},
           {"searcher", exp.value("searcher", "")},
           {"seed", exp.value("seed", Json(nullptr))},
           {"config", redact_notify(exp.value("config", Json::object()))},
           {"trials", Json::array()},
           {"best_trial", Json(nullptr)}};
  // Computed from the trials, as `best` and `ls` do: the same answer while it runs and after.
  if (const Json* best = best_trial_record(exp, trials)) out["best_trial"] = (*best)["id"];
  for (const Json& t : trials) out["trials"].push_back(trial_json(t));
  if (exp.contains("searcher_state")) out["searcher_state"] = exp["searcher_state"];
  // The agents its trials may run on (docs/peers.md "Placement"), and whether this machine.
  if (exp.contains("peers")) out["peers"] = exp["peers"];
  if (exp.contains("run_locally")) out["run_locally"] = exp["run_locally"];
  // Provenance (SPEC §5): what the experiment ran, for scripts and `cairn compare`.
  for (const char* key : {"code", "data", "dependencies", "reproduces", "warm_start"})
    if (exp.contains(key)) out[key] = exp[key];
  return out;
}

int show_experiment(ExperimentReader& reader, bool json) {
  auto exp = reader.experiment();
  if (!exp.ok()) return fail(exp.status());
  auto trials = reader.trials();
  if (!trials.ok()) return fail(trials.status());
  if (json) {
    print_json(experiment_json(*exp, *trials));
    return 0;
  }
  const Json& cfg = (*exp)["config"];
  const Json searcher = cfg.value("searcher", Json::object());
  std::cout << "experiment " << exp->value("id", 0) << "  " << exp->value("name", "") << "  "
            << exp->value("state", "") << "\n";
  std::cout << "searcher    " << exp->value("searcher", "") << " (metric "
            << searcher.value("metric", "") << ", "
            << MetricOrder(searcher.value("smaller_is_better", true)).better_word()
            << " is better)\n";
  std::cout << "seed        " << exp->value("seed", Json(nullptr)).dump() << "\n";
  std::cout << "config      " << exp->value("config_file", "") << "\n";
  // What the file alone does not say (`show --json` has the whole effective config).
  if (const Json sets = exp->value("sets", Json::array()); sets.is_array() && !sets.empty()) {
    std::cout << "overrides  ";
    for (const Json& s : sets)
      std::cout << " --set " << (s.is_string() ? s.get<std::string>() : s.dump());
    std::cout << "\n";
  }
  // A config with Determined's keys gets Determined's defaults for the keys it does not
  // write (docs/determined.md): said here, since the file does not say it.
  if (const Json d = cfg.value("determined_defaults", Json()); d.is_object()) {
    std::cout << "defaults    Determined's, for its key " << d.value("because", "") << ":";
    const char* sep = " ";
    const Json values = d.value("values", Json::object());
    for (const auto& item : values.items()) {
      std::string value = item.value().dump();
      if (item.value().is_array()) {
        value = "[";
        for (const Json& p : item.value())
          value += (value.size() > 1 ? ", " : "") + p.value("name", "");
        value += "]";
      }
      std::cout << sep << item.key() << " " << value;
      sep = ", ";
    }
    std::cout << "\n";
  }
  // Determined's warm start: the checkpoint every trial starts from until it has its own.
  if (const Json w = exp->value("warm_start", Json()); w.is_object()) {
    std::cout << "warm start  checkpoint " << w.value("checkpoint", "").substr(0, 12)
              << " of trial " << w.value("trial", std::string("?")) << " (step "
              << w.value("steps_completed", Json(0)).dump() << "; " << w.value("key", "") << " "
              << w.value("ref", Json()).dump() << ")\n";
  }
  std::cout << "entrypoint  " << cfg.value("entrypoint", Json(nullptr)).dump() << "\n";
  if (exp->contains("code")) {
    const Json& code = (*exp)["code"];
    std::cout << "code        snapshot " << code.value("commit", "").substr(0, 12) << " ("
              << code.value("files", 0) << " files)";
    if (code.contains("git"))
      std::cout << ", git " << code["git"].value("head", "").substr(0, 12)
                << (code["git"].value("branch", "").empty()
                        ? ""
                        : " on " + code["git"].value("branch", ""))
                << (code["git"].value("dirty", false) ? " (dirty)" : "");
    std::cout << "\n";
  }
  if (exp->contains("data")) {
    // Read as compare and reproduce read it, so a damaged record is named, not shown as data.
    auto data = data_fingerprint_from_json((*exp)["data"]);
    if (!data.ok())
      std::cout << "data        damaged record: " << data.status().message() << "\n";
    else if (!data->files.empty())
      std::cout << "data        " << data->files.size() << " files, digest "
                << data->digest.substr(0, 12)
                << (data->stored ? " (kept in the store)" : " (fingerprinted only)") << "\n";
  }
  if (exp->contains("reproduces"))
    std::cout << "reproduces  " << (*exp)["reproduces"].value("trial", "") << "\n";
  if (const Json* best = best_trial_record(*exp, *trials))
    std::cout << "best trial  " << (*best)["id"].get<std::string>() << "\n";
  print_search_state(std::cout, exp->value("searcher_state", Json()),
                     std::to_string(exp->value("id", 0)));
  std::cout << "\n";
  Table table({"TRIAL", "STATE", "STEPS", "RESTARTS", "BEST VALIDATION", "HPARAMS"});
  for (const Json& t : *trials)
    table.add(
        {t.value("id", ""), t.value("state", ""), std::to_string(t.value("steps_completed", 0)),
         std::to_string(t.value("restarts", 0)), metrics_text(t.value("best_validation", Json())),
         hparams_text(t.value("hparams", Json()))});
  table.print(std::cout);
  return 0;
}

int show_trial(ExperimentReader& reader, int64_t index, bool json) {
  auto trial = reader.trial(index);
  if (!trial.ok()) return fail(trial.status());
  auto ckpts = reader.checkpoints(index);
  if (!ckpts.ok()) return fail(ckpts.status());
  Json out = trial_json(*trial);
  // Where each attempt ran: the record holds the latest's only.
  auto attempts = placement_history(reader, index);
  if (!attempts.ok()) return fail(attempts.status());
  if (!attempts->empty()) out["attempts"] = *attempts;
  out["checkpoints"] = Json::array();
  for (const Json& c : *ckpts)  // as `cairn checkpoints`: only those whose files are kept
    if (schema::checkpoint_is_kept(c)) out["checkpoints"].push_back(checkpoint_json(c));
  if (json) {
    print_json(out);
    return 0;
  }
  std::cout << "trial       " << out["id"].get<std::string>() << "  "
            << out["state"].get<std::string>() << "\n";
  std::cout << "hparams     " << hparams_text(out["hparams"]) << "\n";
  std::cout << "seed        " << out["seed"].dump() << "\n";
  std::cout << "steps       " << out["steps_completed"].dump() << "\n";
  std::cout << "restarts    " << out["restarts"].dump() << "\n";
  if (out.contains("placement") && out["placement"].is_array()) {
    // The latest attempt's, then the earlier ones', newest first, when there were several.
    const size_t n = attempts->size();
    std::cout << "ran on      " << placement_text(out["placement"])
              << (n > 1 ? " (attempt " + std::to_string(n) + ")" : "") << "\n";
    for (size_t a = n > 1 ? n - 1 : 0; a-- > 0;)
      std::cout << "            " << placement_text((*attempts)[a]["placement"]) << " (attempt "
                << a + 1 << ")\n";
  }
  std::cout << "best        " << metrics_text(out["best_validation"]) << "\n";
  if (trial->contains("latest_validation"))
    std::cout << "latest      " << metrics_text((*trial)["latest_validation"]["metrics"])
              << " (step " << (*trial)["latest_validation"]["step"].dump() << ")\n";
  if (out.contains("blas_core")) {
    std::cout << "blas        " << blas_core_text(out) << "\n";
    if (const std::string warning = blas_core_field(out, "warning"); !warning.empty())
      std::cout << "            warning: " << warning << "\n";
  }
  if (trial->contains("exit"))
    std::cout << "exit        " << (*trial)["exit"].value("description", "") << "\n";
  if (trial->contains("error"))
    std::cout << "error       " << (*trial)["error"].get<std::string>() << "\n";
  std::cout << "\n";
  Table table({"CHECKPOINT", "STEPS", "BYTES", "METRICS"});
  for (const Json& c : out["checkpoints"])
    table.add({c["id"].get<std::string>().substr(0, 12), c["steps_completed"].dump(),
               c["bytes"].dump(), metrics_text(c["metrics"])});
  table.print(std::cout);
  return 0;
}

int show(const GlobalOptions& global, const std::string& id_text, bool json) {
  auto id = parse_id(id_text);
  if (!id.ok()) return fail(id.status());
  ViewStep failed = ViewStep::kStore;
  auto view = open_experiment_view(global, id->experiment, &failed);
  if (!view.ok())
    return fail(view.status(),
                failed == ViewStep::kExperiment ? "`cairn ls` lists the experiments" : "");
  return id->trial ? show_trial(**view, id->trial, json) : show_experiment(**view, json);
}

}  // namespace

void add_show(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("show", "Show an experiment (7) or a trial (7.3)");
  cmd->add_option("id", *id, "Experiment or trial id")->required()->type_name("ID");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([&global, &outcome, id, json] { outcome.exit_code = show(global, *id, *json); });
}

}  // namespace cairn::cli
