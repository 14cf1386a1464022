// `cairn reproduce TRIAL [--verify]`: re-runs a recorded trial from its code snapshot, with
// its hyperparameters, seed, environment and deterministic settings, as a new experiment;
// with --verify, compares the new metric series with the recorded one, step by step.
#include <iostream>

#include "cli/command.h"
#include "cli/new_experiment.h"
#include "cli/table.h"
#include "cli/trial_ref.h"
#include "common/file_util.h"
#include "engine/dependency_fingerprint.h"
#include "engine/machine_resources.h"
#include "engine/provenance.h"
#include "store/data_fingerprint.h"
#include "store/reproduce_workdir.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

std::string short_value(const Json& v) {
  if (v.is_null()) return "(none)";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// Warns, before running, about what the recorded run had that this machine no longer has.
void warn_about_drift(const StoreLayout& store, const TrialRef& ref,
                      const ExperimentConfig& config) {
  DependencyInput in;
  in.entrypoint = config.entrypoint;
  in.workdir = config.workdir;
  in.environment = config.environment;
  in.builtin = is_builtin_entrypoint(config);
  const Json now = dependency_fingerprint(store, in);
  const Json then = ref.experiment.value("dependencies", Json::object());
  std::vector<std::string> changed;
  for (auto it = then.begin(); it != then.end(); ++it) {
    const Json current = now.value(it.key(), Json());
    if (current != it.value())
      changed.push_back(it.key() + ": " + short_value(it.value()) + " → " + short_value(current));
  }
  for (auto it = now.begin(); it != now.end(); ++it)
    if (!then.contains(it.key()))
      changed.push_back(it.key() + ": (none) → " + short_value(it.value()));
  if (!changed.empty()) {
    std::cerr << "cairn: warning: " << changed.size()
              << " dependencies differ from the recorded run; the result may differ:\n";
    for (size_t i = 0; i < changed.size() && i < 20; ++i) std::cerr << "  " << changed[i] << "\n";
  }
}

struct Mismatch {
  int64_t step = 0;
  std::string what;  // empty: the series match
};

// Step by step, in step order: the two series must hold the same steps, with the same
// metrics and identical values. The first step at which they part is reported, whether a
// step or a metric is missing on one side or a value differs.
Mismatch first_difference(const char* kind, const std::vector<MetricPoint>& recorded,
                          const std::vector<MetricPoint>& replayed) {
  const std::string in = std::string(" (") + kind + ")";
  size_t i = 0, j = 0;
  while (i < recorded.size() || j < replayed.size()) {
    if (j == replayed.size() || (i < recorded.size() && recorded[i].step < replayed[j].step)) {
      const int64_t step = recorded[i].step;
      return {step, "step " + std::to_string(step) + in + " is missing from the re-run"};
    }
    if (i == recorded.size() || replayed[j].step < recorded[i].step) {
      const int64_t step = replayed[j].step;
      return {step, "step " + std::to_string(step) + in + " is in the re-run only"};
    }
    const int64_t step = recorded[i].step;
    const Json& a = recorded[i].metrics;
    const Json& b = replayed[j].metrics;
    for (auto it = a.begin(); it != a.end(); ++it) {
      const Json other = b.value(it.key(), Json());
      if (other != it.value())
        return {step, "first difference at step " + std::to_string(step) + in + ": " + it.key() +
                          " " + short_value(it.value()) + " recorded, " + short_value(other) +
                          " now"};
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key()))
        return {step, "first difference at step " + std::to_string(step) + in + ": " + it.key() +
                          " is reported by the re-run only"};
    ++i;
    ++j;
  }
  return {};
}

int reproduce(const GlobalOptions& global, const std::string& id_text, bool verify) {
  auto id = parse_id(id_text);
  if (!id.ok()) return fail(id.status());
  if (id->trial == 0)
    return fail(Status::BadInput("reproduce needs a trial id (EXP.N), got " + id_text));
  auto store = open_store(global);
  if (!store.ok()) return fail(store.status());
  auto ref = load_trial_ref(*store, id_text);
  if (!ref.ok()) return fail(ref.status());
  if (!ref->experiment.contains("code"))
    return fail(Status::Failed("trial " + ref->id +
                               " was recorded before cairn kept code snapshots; it cannot be "
                               "reproduced"));
  if (ref->train_lengths.empty())
    return fail(
        Status::Failed("trial " + ref->id + " never trained; there is nothing to reproduce"));

  std::error_code ec;
  fs::create_directories(store->reproduce(), ec);
  auto dir = make_unique_dir(store->reproduce(), ref->id + "-");
  if (!dir.ok()) return fail(dir.status());
  // Until an experiment records it as its workdir, nothing else would ever remove it.
  ScopedDirRemover unrecorded(*dir);

  // The recorded config, as the re-run runs it: from the fresh checkout. The recorded
  // workdir may be gone (a project moved or deleted since, or the checkout of an earlier
  // reproduce that `cairn gc` removed), and nothing but data too large to keep is read there.
  NewExperiment what;
  what.config_file = ref->experiment.value("config_file", "");
  what.config_text = ref->experiment.value("config_text", "");
  for (const Json& s : ref->experiment.value("sets", Json::array()))
    if (!s.get<std::string>().starts_with("workdir=")) what.sets.push_back(s.get<std::string>());
  what.sets.push_back("workdir=" + Json(dir->string()).dump());
  what.sets.push_back("reproducibility.seed=" + ref->experiment["seed"].dump());
  // Read as when the experiment was created: the re-run's one trial takes the recorded
  // trial's hyperparameters, which it trained with, and checks them itself as any trial does.
  auto config = parse_experiment_config(what.config_text, what.config_file,
                                        fs::path(what.config_file).parent_path(), what.sets,
                                        ConfigUse::kStoredExperiment);
  if (!config.ok()) return fail(config.status());
  // Before the checkout and the experiment exist, as `cairn run` does.
  if (Status st = check_machine_resources(*config, 0); !st.ok()) return fail(st);

  // The recorded code and data, written into the checkout; data too large to keep is linked
  // from where the recorded run read it.
  ExperimentConfig recorded = *config;
  recorded.workdir = ref->experiment.value("workdir", config->workdir.string());
  Status st = materialize_workdir(*store, ref->experiment, recorded, *dir);
  if (!st.ok()) return fail(st);
  // How the checkout looks now: `cairn gc` removes it once the re-run has ended, but only if
  // it still looks so (store/reproduce_workdir.h).
  auto fingerprint = checkout_fingerprint(*dir);
  if (!fingerprint.ok()) return fail(fingerprint.status());
  auto data = data_fingerprint_from_json(ref->experiment.value("data", Json::object()));
  if (data.ok() && !data->stored && !data->files.empty())
    std::cerr << "cairn: warning: the recorded data (" << data->files.size()
              << " files) was too large to keep; the re-run reads it where it is now\n";

  config->name = "reproduce-" + ref->id;
  warn_about_drift(*store, *ref, *config);
  what.extra = {{"reproduces",
                 {{"trial", ref->id},
                  {"hparams", ref->trial.value("hparams", Json::object())},
                  {"seed", ref->trial["seed"]},
                  {"lengths", ref->train_lengths},
                  {"checkout_fingerprint", *fingerprint}}}};
  int64_t new_id = 0;
  const int rc = create_and_drive(*store, std::move(*config), what, &new_id);
  if (new_id != 0) unrecorded.release();  // the re-run's; `cairn gc` removes it once it ended
  if (rc != 0 || !verify) return rc;

  auto again = load_trial_ref(*store, std::to_string(new_id) + ".1");
  if (!again.ok()) return fail(again.status());
  Mismatch training = first_difference("training", ref->training, again->training);
  Mismatch validation = first_difference("validation", ref->validation, again->validation);
  // The earliest step that differs, whichever series it is in.
  Mismatch first = training;
  if (first.what.empty() || (!validation.what.empty() && validation.step < first.step))
    first = validation;
  if (!first.what.empty())
    return fail(Status::Failed("--verify: " + again->id + " does not reproduce " + ref->id + ": " +
                               first.what));
  std::cout << "cairn: verified: " << again->id << " reproduces " << ref->id << " exactly ("
            << ref->training.size() << " training and " << ref->validation.size()
            << " validation steps)\n";
  return 0;
}

}  // namespace

void add_reproduce(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  auto verify = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "reproduce", "Re-run a trial from its recorded code, data, hyperparameters and seed");
  cmd->add_option("trial", *id, "Trial id")->required()->type_name("TRIAL");
  cmd->add_flag("--verify", *verify,
                "Compare the new metric series with the recorded one; exit 1 on a difference");
  cmd->callback(
      [&global, &outcome, id, verify] { outcome.exit_code = reproduce(global, *id, *verify); });
}

}  // namespace cairn::cli
