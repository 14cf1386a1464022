// `cairn reproduce TRIAL [--verify] [--allow-data-change] [--slots N] [--peers …] [--key-file F]`:
// re-runs a recorded trial from its code snapshot, with its hyperparameters, seed, environment
// and deterministic settings, as a new experiment (a pbt clone: from its parent's checkpoint,
// as it started), on this machine and the peers as `cairn run` would place it; with --verify,
// compares the new metric series with the recorded one, step by step.
#include <iostream>

#include "cli/command.h"
#include "cli/experiment_control.h"
#include "cli/new_experiment.h"
#include "cli/placement_options.h"
#include "cli/replay_extent.h"
#include "cli/table.h"
#include "cli/trial_ref.h"
#include "common/cpu_features.h"
#include "common/file_util.h"
#include "engine/coordinator/dependency_fingerprint.h"
#include "engine/coordinator/provenance.h"
#include "engine/coordinator/trial_blas_core.h"
#include "store/data_fingerprint.h"
#include "store/experiment_reader.h"
#include "store/reproduce_workdir.h"
#include "store/schema.h"
#include "trainer/blas_core_type.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

struct ReproduceOptions {
  std::string trial;
  bool verify = false;
  bool allow_data_change = false;
  PlacementOptions placement;  // --slots, --peers, --key-file
};

std::string short_value(const Json& v) {
  if (v.is_null()) return "(none)";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// The OpenBLAS kernels a builtin:mlp trial recorded it ran ("" for none: another trial, or
// one recorded before cairn chose them).
std::string recorded_blas_core(const TrialRef& ref) {
  return blas_core_field(ref.trial, "core");
}

// Why a re-run's numbers may differ in its OpenBLAS kernels: "" when it ran the recorded ones.
std::string kernels_note(const TrialRef& recorded, const TrialRef& again) {
  const std::string then = recorded_blas_core(recorded);
  const std::string now = recorded_blas_core(again);
  if (then.empty() || now.empty() || then == now) return "";
  std::string note = "; " + again.id + " ran OpenBLAS's " + now + " kernels, " + recorded.id +
                     " ran " + then + "'s";
  if (const auto core = blas::find_core_type(then);
      core && !blas::can_run(*core, this_cpu_features()))
    note += ", which this CPU cannot run (they need " +
            blas::missing_for(*core, this_cpu_features()) + ")";
  return note;
}

// Warns, before running, about what the recorded run had that this machine no longer has.
void warn_about_drift(const StoreLayout& store, const TrialRef& ref,
                      const ExperimentConfig& config) {
  DependencyInput in;
  in.entrypoint = config.entrypoint;
  in.workdir = config.workdir;
  in.environment = config.environment;
  in.builtin = is_builtin_entrypoint(config);
  in.deterministic = config.reproducibility.deterministic;
  in.recorded_blas_core = recorded_blas_core(ref);
  const Json now = dependency_fingerprint(store, in);
  const Json then = ref.experiment.value("dependencies", Json::object());
  // The OpenBLAS kernels are compared by name: "Haswell (user)" then and "Haswell (recorded)"
  // now (a deterministic re-run takes the recorded ones) are the same kernels.
  auto kernels = [](const Json& v) {
    const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    return text.substr(0, text.find(" ("));
  };
  std::vector<std::string> changed;
  for (auto it = then.begin(); it != then.end(); ++it) {
    const Json current = now.value(it.key(), Json());
    if (it.key() == "openblas-core" && current.is_string() && kernels(current) == kernels(*it))
      continue;
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

std::string describe(const DataChanges& changes) {
  constexpr size_t kShown = 3;
  std::string text;
  auto part = [&](const char* how, const std::vector<std::string>& paths) {
    if (paths.empty()) return;
    text += (text.empty() ? "" : ", ") + std::to_string(paths.size()) + " " + how + " (" +
            name_list(paths, kShown) + ")";
  };
  part("changed", changes.changed);
  part("removed", changes.removed);
  part("added", changes.added);
  return text;
}

// Where the data is read, for messages: each `data:` entry, as a link in a checkout resolves
// (relative entries), or as given (absolute ones, which may lie anywhere).
std::string data_places(const ExperimentConfig& live) {
  std::vector<std::string> places;
  for (const std::string& entry : live.data) {
    fs::path path = fs::path(entry).lexically_normal();
    if (path.filename().empty()) path = path.parent_path();  // "data/": name the directory
    std::error_code ec;
    const fs::path resolved =
        path.is_absolute() ? path : fs::weakly_canonical(live.workdir / path, ec);
    places.push_back((ec ? live.workdir / path : resolved).lexically_normal().string());
  }
  return name_list(places, 3);
}

// Data too large to keep was only fingerprinted, so the re-run reads it where it is now
// (SPEC §5). A re-run on other data would not reproduce the trial, and would seem to say
// the trial is not reproducible; so the data is hashed there (as the run hashed it: equal
// data, equal hashes, and a stat per file when unchanged at the same place) and compared with
// the record: a difference stops the reproduce unless the user accepts it, and then is still
// named. The fingerprint taken is the one the re-run records (NewExperiment::data): the
// data is read once, and what was checked is what is recorded.
Result<DataFingerprint> check_unkept_data(const StoreLayout& store, const std::string& trial,
                                          const DataFingerprint& recorded,
                                          const ExperimentConfig& live, bool allow_change) {
  auto now = hash_data(store, live.workdir, live.data);
  if (!now.ok()) return now.status();
  const DataChanges changes = compare_data(recorded, *now);
  const std::string where = data_places(live);
  if (changes.empty()) {
    const size_t n = recorded.files.size();
    std::cout << "cairn: data verified: the recorded data (" << n << (n == 1 ? " file" : " files")
              << ", too large to keep in the store) is unchanged where the re-run reads it ("
              << where << ")" << std::endl;
    return now;
  }
  const std::string what =
      "the data at " + where + " is not what trial " + trial +
      " recorded (it was too large to keep in the store): " + describe(changes);
  if (!allow_change) return Status::BadInput(what);
  std::cerr << "cairn: warning: " << what << "; re-running on it as it is now (--allow-data-change)"
            << std::endl;
  return now;
}

// A pbt clone started from its parent's checkpoint at the step it was cloned at and trained
// only its own segment after it: its re-run starts from the same checkpoint (restored from
// the object store, where retention keeps it while the clone refers to it), so it trains the
// same segment. Returns reproduces["parent"] for the plan (adopt_replayed_parent()), or null
// for a trial that started from scratch (not a clone, or a clone whose parent left none).
Result<Json> replayed_parent(const StoreLayout& store, const TrialRef& ref) {
  const Json checkpoint = ref.trial.value("parent_checkpoint", Json());
  if (!ref.trial.contains("parent") || !checkpoint.is_string()) return Json();
  const std::string id = checkpoint.get<std::string>();
  const Json& parent = ref.trial["parent"];
  const std::string parent_id = parent.value("trial", std::string("?"));
  auto exp = parse_id(ref.id);
  if (!exp.ok()) return exp.status();
  auto reader = ExperimentReader::open(store, exp->experiment);
  if (!reader.ok()) return reader.status();
  auto record = (*reader)->db().get_json(schema::checkpoint_key(id));
  if (!record.ok()) return record.status();
  const std::string what = "trial " + ref.id + " is a clone that started from its parent " +
                           parent_id + "'s checkpoint " + id.substr(0, 12) + ", ";
  if (!record->has_value() || !schema::checkpoint_is_kept(**record))
    return Status::Failed(what + "which is no longer in the store: it cannot be re-run from " +
                          "where it started");
  if ((**record).value("corrupt", false))
    return Status::Failed(what + "which is corrupt: it cannot be re-run from where it started");
  return Json{{"trial", parent_id},
              {"step", parent.value("step", int64_t{0})},
              {"checkpoint", id},
              {"checkpoint_step", (**record).value("steps_completed", int64_t{0})}};
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

// --verify's exit status when the re-run was interrupted: neither verified (0) nor shown to
// differ (1). 130 is what a shell reports for a command ended by Ctrl-C.
constexpr int kNotVerified = 130;

// A re-run that cannot be placed without peers, of a trial whose run had some: where it ran,
// and how to re-run it there (--peers given to `cairn run` are not part of the config, so a
// re-run does not go back to them unasked: docs/reproducibility.md).
Status with_recorded_peers(const Status& refused, const TrialRef& ref,
                           const ExperimentConfig& config, const PlacementOptions& placement) {
  std::vector<std::string> peers;
  for (const Json& peer : ref.experiment.value("peers", Json::array()))
    if (peer.is_string()) peers.push_back(peer.get<std::string>());
  if (peers.empty() || !placement.peers.empty() || config.resources.peers_mode != "none")
    return refused;
  std::string list;
  for (const std::string& peer : peers) list += (list.empty() ? "" : ",") + peer;
  return Status::BadInput(refused.message() + "; trial " + ref.id + " ran on the agents " + list +
                          ": --peers " + list + " re-runs it there");
}

int reproduce(const GlobalOptions& global, const ReproduceOptions& opts) {
  auto id = parse_id(opts.trial);
  if (!id.ok()) return fail(id.status());
  if (id->trial == 0)
    return fail(Status::BadInput("reproduce needs a trial id (EXP.N), got " + opts.trial));
  auto store = open_store(global);
  if (!store.ok()) return fail(store.status());
  auto ref = load_trial_ref(*store, opts.trial);
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
  if (!ref->experiment.value("config", Json::object()).contains("determined_defaults"))
    drop_determined_defaults(*config);  // recorded before cairn applied them
  // Before the data is read and the experiment exists, as `cairn run` does: the peers
  // (--peers, else the recorded config's resources.peers) and the slots of this machine
  // (--slots, else the recorded run's) and theirs.
  if (Status st =
          place_new_experiment(opts.placement, *config, recorded_slots(ref->experiment), what);
      !st.ok())
    return fail(with_recorded_peers(st, *ref, *config, opts.placement));

  // The recorded code and data, written into the checkout; data too large to keep is linked
  // from where the recorded run read it, or, when the project moved with its store, from the
  // same place in the project's new location (moved_workdir(), as resume takes the workdir).
  ExperimentConfig recorded = *config;
  recorded.workdir = ref->experiment.value("workdir", config->workdir.string());
  auto data = data_fingerprint_from_json(ref->experiment.value("data", Json::object()));
  if (!data.ok()) return fail(data.status());
  if (!data->stored && !data->files.empty()) {
    if (const fs::path now = moved_workdir(ref->experiment, *store); !now.empty()) {
      std::cout << "cairn: the project moved: the data too large to keep is read in "
                << now.string() << ", not " << recorded.workdir.string() << std::endl;
      recorded.workdir = now;
    }
    auto checked = check_unkept_data(*store, ref->id, *data, recorded, opts.allow_data_change);
    if (!checked.ok())
      return fail(checked.status(),
                  checked.status().exit_code() == 2
                      ? "re-running on it would not reproduce " + ref->id +
                            ": put the recorded data back, or pass --allow-data-change "
                            "to re-run on it as it is now"
                      : "");
    what.data = std::move(*checked);
  }
  Status st = materialize_workdir(*store, ref->experiment, recorded, *dir);
  if (!st.ok()) return fail(st);
  // How the checkout looks now: `cairn gc` removes it once the re-run has ended, but only if
  // it still looks so (store/reproduce_workdir.h).
  auto fingerprint = checkout_fingerprint(*dir);
  if (!fingerprint.ok()) return fail(fingerprint.status());

  config->name = "reproduce-" + ref->id;
  warn_about_drift(*store, *ref, *config);
  // Kernels this CPU cannot run cannot give the recorded bits: said before the re-run, and
  // with --verify's verdict (the coordinator picks kernels it can run, and says so too).
  if (const std::string core = recorded_blas_core(*ref); !core.empty())
    if (const auto type = blas::find_core_type(core);
        type && !blas::can_run(*type, this_cpu_features()))
      std::cerr << "cairn: warning: trial " << ref->id << " ran OpenBLAS's " << core
                << " kernels, which this CPU cannot run (they need "
                << blas::missing_for(*type, this_cpu_features())
                << "): the re-run runs other kernels, and its results may differ" << std::endl;
  auto parent = replayed_parent(*store, *ref);
  if (!parent.ok()) return fail(parent.status());
  if (!parent->is_null())
    std::cout << "cairn: trial " << ref->id << " is a clone of "
              << (*parent)["trial"].get<std::string>() << ": the re-run starts from its checkpoint "
              << (*parent)["checkpoint"].get<std::string>().substr(0, 12) << " at step "
              << (*parent)["checkpoint_step"] << " and trains only " << ref->id << "'s own steps"
              << std::endl;
  const ReplayExtent extent = replay_extent(*ref);
  if (extent.cut)
    std::cout << "cairn: trial " << ref->id << " (" << ref->trial.value("state", "")
              << ") stopped before the " << ref->train_lengths.back()
              << " steps it was to train: the re-run trains to step " << extent.end
              << ", where it last " << (ref->validation.empty() ? "reported training" : "validated")
              << std::endl;
  what.extra = {{"reproduces",
                 {{"trial", ref->id},
                  {"hparams", ref->trial.value("hparams", Json::object())},
                  {"seed", ref->trial["seed"]},
                  {"lengths", extent.lengths},
                  {"checkout_fingerprint", *fingerprint}}}};
  if (!parent->is_null()) what.extra["reproduces"]["parent"] = *parent;
  // Deterministic re-runs run the recorded kernels (engine/coordinator/trial_blas_core.h).
  if (ref->trial.contains("blas_core"))
    what.extra["reproduces"]["blas_core"] = ref->trial["blas_core"];
  // A warm-started experiment's re-run starts from the checkpoint it started from.
  if (ref->experiment.contains("warm_start"))
    what.extra["warm_start"] = ref->experiment["warm_start"];
  int64_t new_id = 0;
  const int rc = create_and_drive(*store, std::move(*config), what, &new_id);
  if (new_id != 0) unrecorded.release();  // the re-run's; `cairn gc` removes it once it ended
  if (rc != 0 || !opts.verify) return rc;

  auto again = load_trial_ref(*store, std::to_string(new_id) + ".1");
  if (!again.ok()) return fail(again.status());
  // Ctrl-C, `cairn pause`, `cairn kill` or a shutdown stopped the re-run before its end:
  // comparing its shorter series would report a difference that is not there.
  if (const std::string state = again->experiment.value("state", ""); state != "COMPLETED") {
    std::cerr << "cairn: the re-run " << new_id << " was interrupted (" << state
              << "): not verified; "
              << (state == "CANCELED"
                      ? std::string()
                      : "`cairn resume " + std::to_string(new_id) + "` finishes it, and ")
              << "`cairn reproduce " << ref->id << " --verify` checks again from the start\n";
    return kNotVerified;
  }
  // The steps both ran: a cut re-run stops where the original did (replay_extent()), so
  // what the original trained after its last validation is not compared, and, when it never
  // validated, neither is the validation that closes the re-run's last length.
  const std::vector<MetricPoint> recorded_training = up_to(ref->training, extent.end);
  const std::vector<MetricPoint> recorded_validation = up_to(ref->validation, extent.end);
  std::vector<MetricPoint> replayed_validation = again->validation;
  if (extent.cut && (recorded_validation.empty() || recorded_validation.back().step != extent.end))
    std::erase_if(replayed_validation, [&](const MetricPoint& p) { return p.step == extent.end; });
  Mismatch training = first_difference("training", recorded_training, again->training);
  Mismatch validation = first_difference("validation", recorded_validation, replayed_validation);
  // The earliest step that differs, whichever series it is in.
  Mismatch first = training;
  if (first.what.empty() || (!validation.what.empty() && validation.step < first.step))
    first = validation;
  if (!first.what.empty())
    return fail(Status::Failed("--verify: " + again->id + " does not reproduce " + ref->id + ": " +
                               first.what + kernels_note(*ref, *again)));
  std::cout << "cairn: verified: " << again->id << " reproduces " << ref->id << " exactly ("
            << recorded_training.size() << " training and " << recorded_validation.size()
            << " validation steps"
            << (extent.cut ? ", up to step " + std::to_string(extent.end) + ", where " + ref->id +
                                 " stopped"
                           : std::string())
            << ")\n";
  return 0;
}

}  // namespace

void add_reproduce(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto opts = std::make_shared<ReproduceOptions>();
  CLI::App* cmd = app.add_subcommand(
      "reproduce", "Re-run a trial from its recorded code, data, hyperparameters and seed");
  cmd->add_option("trial", opts->trial, "Trial id")->required()->type_name("TRIAL");
  cmd->add_flag("--verify", opts->verify,
                "Compare the new metric series with the recorded one; exit 1 on a difference "
                "(130: interrupted, not verified)");
  cmd->add_flag("--allow-data-change", opts->allow_data_change,
                "Re-run even when data too large to keep has changed since the trial (the "
                "changes are named as a warning)");
  add_placement_options(cmd, opts->placement,
                        "the recorded run's --slots, else GPUs, or CPU cores");
  cmd->callback([&global, &outcome, opts] { outcome.exit_code = reproduce(global, *opts); });
}

}  // namespace cairn::cli
