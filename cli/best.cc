// `cairn best EXP [--checkpoint]`: the best trial's id, or the path of its best checkpoint
// exported: one line, for scripts and Makefiles.
#include <iostream>
#include <optional>

#include "cli/command.h"
#include "cli/experiment_view.h"
#include "store/checkpoint_files.h"
#include "store/checkpoint_lookup.h"
#include "store/schema.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

int best(const GlobalOptions& global, const std::string& id_text, bool checkpoint) {
  auto id = parse_id(id_text);
  if (!id.ok()) return fail(id.status());
  if (id->trial) return fail(Status::BadInput("best needs an experiment id, not a trial"));
  auto view = open_experiment_view(global, id->experiment);
  if (!view.ok()) return fail(view.status());
  auto exp = (*view)->experiment();
  if (!exp.ok()) return fail(exp.status());
  auto trials = (*view)->trials();
  if (!trials.ok()) return fail(trials.status());
  const Json* record = best_trial_record(*exp, *trials);
  if (!record) {
    const std::string state = exp->value("state", "");
    const std::string metric =
        exp->value("config", Json::object()).value("searcher", Json::object()).value("metric", "");
    return fail(Status::Failed("experiment " + id_text +
                               (schema::experiment_has_ended(state)
                                    ? " ended " + state + " with no trial that validated " + metric
                                    : " has no trial that validated " + metric + " yet")));
  }
  const std::optional<std::string> trial = record->value("id", "");
  if (!checkpoint) {
    std::cout << *trial << "\n";
    return 0;
  }
  auto ckpt = find_checkpoint(view->store, *trial + "@best");
  if (!ckpt.ok()) return fail(ckpt.status());
  const std::string ckpt_id = ckpt->record["id"].get<std::string>();
  // Exported once per checkpoint under the store, so repeated calls (make) are cheap and the
  // path is stable.
  const fs::path dir = view->store.root() / "exports" / ckpt_id;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    ObjectStore objects(view->store.objects());
    auto manifest = load_manifest(objects, ckpt_id);
    if (!manifest.ok()) return fail(manifest.status());
    auto tmp = make_unique_dir(view->store.root() / "exports", "tmp-");
    if (!tmp.ok()) return fail(tmp.status());
    fs::remove(*tmp, ec);
    Status st = materialize_checkpoint(objects, *manifest, *tmp);
    if (!st.ok()) return fail(st);
    fs::rename(*tmp, dir, ec);
    if (ec && !fs::exists(dir))
      return fail(Status::Io("cannot create " + dir.string() + ": " + ec.message()));
    fs::remove_all(*tmp, ec);
  }
  std::cout << dir.string() << "\n";
  return 0;
}

}  // namespace

void add_best(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  auto checkpoint = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("best", "Print the best trial id (or its best checkpoint, exported)");
  cmd->add_option("id", *id, "Experiment id")->required()->type_name("EXP");
  cmd->add_flag("--checkpoint", *checkpoint,
                "Export the best trial's best checkpoint and print its path");
  cmd->callback(
      [&global, &outcome, id, checkpoint] { outcome.exit_code = best(global, *id, *checkpoint); });
}

}  // namespace cairn::cli
