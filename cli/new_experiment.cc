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
  auto id = allocate_experiment_id(store);
  if (!id.ok()) return fail(id.status());

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
