// `cairn gc [EXP]`: apply the checkpoint retention policy now, remove the workdirs of ended
// `cairn reproduce` re-runs, and report the space reclaimed (docs/retention.md). Experiments
// being driven are left to their coordinators.
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "store/garbage_collector.h"
#include "store/reproduce_workdir.h"
#include "store/retention.h"
#include "store/schema.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

std::string human_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1000 && unit + 1 < std::size(kUnits)) {
    v /= 1000;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[unit]);
  return buf;
}

struct Collected {
  int64_t id = 0;
  bool running = false;
  DeleteResult result;
  RemovedWorkdir workdir;     // a `cairn reproduce` re-run's checkout: removed or kept, why
  std::string workdir_error;  // removing it failed
};

// Retention for one experiment that nobody drives: opened for writing (which also keeps a
// `cairn resume` from starting underneath us), policy applied, doomed checkpoints deleted.
Result<Collected> collect(const StoreLayout& store, int64_t id) {
  Collected out;
  out.id = id;
  if (Status st = database_presence(store.experiment(id)); !st.ok()) {
    if (st.kind() == ErrorKind::kNotFound) return out;  // being created
    return st;
  }
  if (experiment_is_driven(store.experiment(id))) {
    out.running = true;
    return out;
  }
  auto db = ExperimentDb::open(store.experiment(id), ExperimentDb::Mode::kWrite, store.tmp());
  if (!db.ok()) {
    if (db.status().kind() != ErrorKind::kFailed) return db.status();
    out.running = true;  // it started between the check and the open
    return out;
  }
  auto doomed = checkpoints_to_delete(**db);
  if (!doomed.ok() && doomed.status().kind() != ErrorKind::kNotFound) return doomed.status();
  if (doomed.ok()) {  // else no record yet: nothing to delete
    ObjectStore objects(store.objects());
    DeleteOptions options;
    options.fresh_grace = ingest_grace(store, id);
    auto result = delete_checkpoints(**db, objects, store, id, *doomed, options);
    if (!result.ok()) return result.status();
    out.result = *result;
  }
  // The experiment is open for writing, so nothing can resume it while its checkout goes.
  // A checkout that cannot be removed is worth a warning, not the retention above.
  auto record = (*db)->get_json(schema::kExperiment);
  if (record.ok() && record->has_value()) {
    auto removed = remove_ended_reproduce_workdir(store, **record);
    if (removed.ok())
      out.workdir = *removed;
    else
      out.workdir_error = removed.status().message();
  }
  return out;
}

void print_collected(const Collected& c) {
  if (c.running) {
    std::cout << "experiment " << c.id
              << " is running; its coordinator applies retention as checkpoints arrive\n";
    return;
  }
  std::cout << "experiment " << c.id << ": deleted " << c.result.deleted << " checkpoint"
            << (c.result.deleted == 1 ? "" : "s") << ", reclaimed "
            << human_bytes(c.result.bytes_reclaimed);
  if (c.result.pending > 0)
    std::cout << " (" << c.result.pending
              << " more once no other experiment is running: their files may be in use)";
  if (!c.workdir.path.empty() && c.workdir.kept_because.empty())
    std::cout << "; removed its reproduce checkout " << c.workdir.path << " ("
              << human_bytes(c.workdir.bytes) << ")";
  else if (!c.workdir.path.empty())
    std::cout << "; kept its reproduce checkout " << c.workdir.path << ": "
              << c.workdir.kept_because;
  std::cout << "\n";
}

Json report_json(const std::vector<Collected>& collected, const SweepResult& sweep,
                 uint64_t total) {
  Json experiments = Json::array();
  for (const Collected& c : collected) {
    Json e{
        {"id", c.id}, {"deleted", c.result.deleted}, {"bytes_reclaimed", c.result.bytes_reclaimed}};
    if (c.result.pending > 0) e["pending"] = c.result.pending;
    if (!c.workdir.path.empty() && c.workdir.kept_because.empty())
      e["reproduce_workdir"] = {{"path", c.workdir.path}, {"bytes_reclaimed", c.workdir.bytes}};
    else if (!c.workdir.path.empty())
      e["reproduce_workdir"] = {{"path", c.workdir.path}, {"kept", c.workdir.kept_because}};
    if (!c.workdir_error.empty()) e["reproduce_workdir_error"] = c.workdir_error;
    if (c.running) e["running"] = true;
    experiments.push_back(std::move(e));
  }
  return Json{{"experiments", experiments},
              {"unreferenced",
               {{"objects_removed", sweep.objects_removed},
                {"staging_removed", sweep.staging_removed},
                {"bytes_reclaimed", sweep.bytes_reclaimed}}},
              {"bytes_reclaimed", total}};
}

Result<std::vector<int64_t>> chosen_experiments(const StoreLayout& store,
                                                const std::string& exp_text) {
  if (exp_text.empty()) return list_experiment_ids(store);
  auto id = parse_id(exp_text);
  if (!id.ok()) return id.status();
  if (id->trial)
    return Status::BadInput("'" + exp_text + "' is a trial; `cairn gc` takes an experiment id");
  std::error_code ec;
  if (!fs::is_directory(store.experiment(id->experiment), ec))
    return Status::NotFound("no experiment " + std::to_string(id->experiment));
  return std::vector<int64_t>{id->experiment};
}

int gc(const GlobalOptions& global, const std::string& exp_text, bool json) {
  auto store = open_store(global);
  if (!store.ok()) return fail(store.status());
  auto ids = chosen_experiments(*store, exp_text);
  if (!ids.ok()) return fail(ids.status(), "`cairn ls` lists the experiments");

  std::vector<Collected> collected;
  int exit_code = 0;
  uint64_t total = 0;
  for (int64_t id : *ids) {
    auto c = collect(*store, id);
    if (!c.ok()) {
      exit_code =
          fail(Status::Failed("experiment " + std::to_string(id) + ": " + c.status().message()));
      continue;
    }
    if (!json) print_collected(*c);
    if (!c->workdir_error.empty())
      std::cerr << "cairn: warning: experiment " << id << ": " << c->workdir_error << "\n";
    total += c->result.bytes_reclaimed + c->workdir.bytes;
    collected.push_back(*c);
  }
  // Leftovers of crashes (objects adopted but never registered, abandoned staging) and of
  // deletions that could not finish: everything no live checkpoint names.
  SweepResult swept;
  auto sweep = sweep_unreferenced_objects(*store);
  if (sweep.ok()) {
    swept = *sweep;
    total += swept.bytes_reclaimed;
  } else {
    exit_code = fail(sweep.status());
  }
  if (json) {
    print_json(report_json(collected, swept, total));
  } else {
    if (swept.objects_removed + swept.staging_removed > 0)
      std::cout << "unreferenced files: removed " << swept.objects_removed << " objects and "
                << swept.staging_removed << " staging directories, reclaimed "
                << human_bytes(swept.bytes_reclaimed) << "\n";
    std::cout << "total: reclaimed " << human_bytes(total) << "\n";
  }
  return exit_code;
}

}  // namespace

void add_gc(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto exp = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "gc",
      "Apply the checkpoint retention policy now, remove ended re-runs' reproduce workdirs, and "
      "report the space reclaimed");
  cmd->add_option("experiment", *exp, "Experiment id (default: every experiment)")
      ->type_name("EXP");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([&global, &outcome, exp, json] { outcome.exit_code = gc(global, *exp, *json); });
}

}  // namespace cairn::cli
