#include "cli/new_experiment.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <iostream>
#include <random>

#include "cli/command.h"
#include "cli/experiment_control.h"
#include "cli/webhook_sender.h"
#include "common/build_info.h"
#include "common/file_util.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/provenance.h"
#include "engine/coordinator/trial_blas_core.h"
#include "store/checkpoint_lookup.h"
#include "store/experiment_db.h"
#include "store/schema.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

// Detaches from the terminal: the parent returns, the child goes on in a new session with
// its output in the experiment's coordinator.log. Must happen before RocksDB starts threads.
bool detach_into(const fs::path& log_file) {
  std::fflush(stdout);
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid > 0) ::_exit(0);
  start_session_with_output(log_file);
  return true;
}

// Determined's warm start (searcher.source_trial_id / source_checkpoint_uuid): the
// checkpoint every trial starts from until it has one of its own, decided once, here: the
// source trial's later checkpoints do not change what this experiment started from.
Result<Json> resolve_warm_start(const StoreLayout& store, const SearcherConfig::WarmStart& warm) {
  auto found = warm.trial_number > 0 ? latest_checkpoint_of_number(store, warm.trial_number)
                                     : find_checkpoint(store, warm.checkpoint);
  if (!found.ok())
    return Status::BadInput(warm.where + ": " + warm.key + ": " + found.status().message());
  const Json& record = found->record;
  Json out{{"key", warm.key},
           {"ref", warm.trial_number > 0 ? Json(warm.trial_number) : Json(warm.checkpoint)},
           {"checkpoint", record["id"]},
           {"experiment", found->experiment},
           {"trial", record.value("trial", Json())},
           {"steps_completed", record.value("steps_completed", Json(0))}};
  const Json meta = record.value("metadata", Json::object());
  if (meta.is_object() && meta.contains("determined_storage_id"))
    out["storage_id"] = meta["determined_storage_id"];
  return out;
}

}  // namespace

int create_and_drive(const StoreLayout& store, ExperimentConfig config, const NewExperiment& what,
                     int64_t* id_out) {
  // What the experiment runs is recorded before it gets an id: a workdir over the snapshot
  // limit or a missing data path is refused without leaving an empty experiment behind.
  // A reproduction's trial runs the recorded OpenBLAS kernels, and its fingerprint says so.
  const std::string blas_core =
      what.extra.contains("reproduces") ? blas_core_field(what.extra["reproduces"], "core") : "";
  auto provenance = capture_provenance(store, config, "cairn: " + config.name,
                                       what.data ? &*what.data : nullptr, blas_core);
  if (!provenance.ok()) return fail(provenance.status());
  // A reproduction starts from the checkpoint its original recorded (in `what.extra`).
  Json warm_start;
  if (config.searcher.warm_start && !what.extra.contains("warm_start")) {
    auto warm = resolve_warm_start(store, *config.searcher.warm_start);
    if (!warm.ok()) return fail(warm.status());
    warm_start = std::move(*warm);
  }
  auto id = allocate_experiment_id(store);
  if (!id.ok()) return fail(id.status());
  // Tests only: die as a kill -9 here would, between taking the id and recording anything.
  if (const char* fail = std::getenv("CAIRN_TEST_DIE_AFTER_CREATE");
      fail && fail == std::string("id"))
    ::_exit(137);

  uint64_t seed = 0;
  if (config.reproducibility.seed) {
    seed = *config.reproducibility.seed;
  } else {
    std::random_device rd;
    seed = rd() & 0x7fffffffu;
  }
  Json experiment{{"id", *id},
                  {"name", config.name},
                  {"state", "ACTIVE"},
                  {"searcher", config.searcher.name},
                  {"seed", seed},
                  {"seed_chosen", !config.reproducibility.seed.has_value()},
                  {"config", config.resolved},
                  {"config_file", what.config_file},
                  {"config_text", what.config_text},
                  {"sets", what.sets},
                  {"workdir", config.workdir.string()},
                  // Where the store was, so that a project moved with its store can be resumed.
                  {"store", fs::weakly_canonical(store.root()).string()},
                  {"created_at", std::time(nullptr)},
                  {"cairn_version", CAIRN_VERSION}};
  // --slots shapes the searcher's decisions (its concurrency): kept for a resume that has
  // to make the first of them (the coordinator died before its first commit).
  if (what.slots > 0) experiment["slots"] = what.slots;
  // Where the trials run, for `resume` (docs/peers.md "Placement").
  if (!what.peers.empty()) experiment["peers"] = what.peers;
  if (!what.run_locally) experiment["run_locally"] = false;
  if (!what.key_file.empty()) experiment["key_file"] = fs::absolute(what.key_file).string();
  if (!warm_start.is_null()) experiment["warm_start"] = warm_start;
  for (auto& item : provenance->items()) experiment[item.key()] = item.value();
  for (auto& item : what.extra.items()) experiment[item.key()] = item.value();

  keep_driving_without_stdout();
  // The id is the first line, alone, so scripts can take it: EXP=$(cairn run --detach x.yaml)
  std::cout << *id << std::endl;
  if (what.detach && !detach_into(store.experiment(*id) / "coordinator.log"))
    return fail(Status::Io("cannot detach: " + errno_text()));

  auto db = ExperimentDb::open(store.experiment(*id), ExperimentDb::Mode::kWrite, store.tmp());
  if (!db.ok()) return fail(db.status());
  StoreBatch batch;
  batch.put_json(schema::kExperiment, experiment);
  batch.put_json(schema::event_key(0),
                 Json{{"seq", 0}, {"type", "experiment_created"}, {"seed", seed}});
  Status st = (*db)->commit(batch, true);
  if (!st.ok()) return fail(st);
  if (id_out) *id_out = *id;  // only now does a record name what `what` describes
  // Tests only: die as a kill -9 here would, between the experiment's first commit and the
  // searcher's (the window docs/fault-tolerance.md, "A search that never started", covers).
  if (const char* fail = std::getenv("CAIRN_TEST_DIE_AFTER_CREATE"); fail && *fail == '1')
    ::_exit(137);
  if (!what.detach && !what.quiet) {
    std::cout << "cairn: experiment " << *id << " '" << config.name << "' (" << config.searcher.name
              << ", seed " << seed << ") in " << store.root().string() << std::endl;
  }

  CoordinatorOptions options;
  options.slots = what.slots;
  options.peers = what.peers;
  options.run_locally = what.run_locally;
  options.key_file = what.key_file;
  options.self_executable = self_executable();
  // After --detach's fork: the sender's thread would not survive it.
  std::unique_ptr<WebhookSender> webhooks =
      make_webhook_sender(config.notify, webhook_spool(store, *id));
  options.notifier = webhooks.get();
  Coordinator coordinator(store, std::move(*db), std::move(config), std::move(experiment), options);
  const int code = coordinator.run();
  if (webhooks) webhooks->drain(kWebhookDrainLimit);
  return code;
}

}  // namespace cairn::cli
