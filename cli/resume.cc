// `cairn resume EXP` / `cairn resume --all`: continue experiments where they stopped.
#include <fcntl.h>
#include <unistd.h>

#include <iostream>

#include "cli/experiment_control.h"
#include "cli/run_peers.h"
#include "cli/webhook_sender.h"
#include "engine/config/config.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/machine_resources.h"
#include "store/experiment_db.h"
#include "store/schema.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

// The key of the experiment's latest event: every drive records some (experiment_resumed,
// experiment_state), so a change says another process drove it meanwhile.
std::string last_event_key(const StoreLayout& store, int64_t id) {
  auto reader = ExperimentReader::open(store, id);
  if (!reader.ok()) return {};
  std::string last;
  (void)(*reader)->db().scan(schema::kEventPrefix, [&](std::string_view key, std::string_view) {
    last = key;
    return true;
  });
  return last;
}

// Notifications an earlier cairn queued for `id` and did not deliver (cli/webhook_sender.h),
// delivered now: for an experiment that has ended, nothing else would.
void deliver_pending_notifications(const StoreLayout& store, int64_t id, const Json& record) {
  const fs::path spool = webhook_spool(store, id);
  if (!has_pending_webhooks(spool)) return;
  auto config = stored_config(record, store);
  if (!config.ok()) {
    std::cerr << "cairn: warning: experiment " << id
              << ": its undelivered notifications stay: " << config.status().message() << "\n";
    return;
  }
  // A pending one goes only if its marker was committed (cli/webhook_sender.h).
  auto reader = ExperimentReader::open(store, id);
  auto markers = reader.ok() ? notify_markers((*reader)->db())
                             : Result<std::set<std::string>>(reader.status());
  if (!markers.ok()) {
    std::cerr << "cairn: warning: experiment " << id
              << ": its undelivered notifications stay: " << markers.status().message() << "\n";
    return;
  }
  if (auto sender = make_webhook_sender(config->notify, spool, std::move(*markers)))
    sender->drain(kWebhookDrainLimit);
}

// `key_override`: --key-file, which replaces the key file the experiment recorded (a key moved,
// or the resume runs where the recorded path means nothing); empty: the recorded one, else
// the default search (CAIRN_KEY_FILE, the per-user path).
int resume_one(const StoreLayout& store, int64_t id, const std::string& key_override) {
  auto status = experiment_status(store, id);
  // `cairn run` stopped between taking the id and its first commit (kill -9 in that short
  // window): nothing of the experiment was recorded, so nothing ran and nothing can be
  // resumed; say so, rather than "no database yet", which reads as if it were on its way.
  if (!status.ok() && status.status().kind() == ErrorKind::kNotFound &&
      fs::is_directory(store.experiment(id)) && !experiment_is_driven(store.experiment(id))) {
    return fail(Status::NotFound("experiment " + std::to_string(id) +
                                 " was stopped before it recorded anything, so none of it ran: "
                                 "start it again with `cairn run`"));
  }
  if (!status.ok()) return fail(status.status());
  if (status->driven && !status->driver) {
    // The lock is held, but not by the recorded driver, which is gone. What holds it then is
    // short-lived: a trial process the dead driver forked, which inherited the lock and drops
    // it when it execs its entrypoint (right after a kill -9, on a loaded machine, that can
    // take a while), or a `cairn gc` pass. Wait for it rather than fail.
    // It can also be another `cairn resume` of this experiment, started at the same moment,
    // that has not recorded itself as the driver yet: what that one did (paused, completed
    // the experiment) is not this resume's to undo once it lets go.
    const std::string events_before = last_event_key(store, id);
    wait_until_undriven(store, id, 10);
    status = experiment_status(store, id);
    if (!status.ok()) return fail(status.status());
    if (!status->driven && last_event_key(store, id) != events_before)
      return fail(Status::Failed("experiment " + std::to_string(id) +
                                 " was driven by another cairn process while this resume "
                                 "waited for it; it is now " +
                                 status->record.value("state", "") + ", and not resumed again"));
  }
  const std::string state = status->record.value("state", "");
  if (status->driven)
    return fail(Status::Failed(
        "experiment " + std::to_string(id) + " is running (driven by process " +
        (status->driver ? std::to_string(*status->driver) : std::string("?")) + ")"));
  if (state == "COMPLETED" || state == "ERROR") {
    std::cout << "cairn: experiment " << id << " is " << state << "; nothing to resume\n";
    deliver_pending_notifications(store, id, status->record);
    return 0;
  }
  if (state == "CANCELED") {
    deliver_pending_notifications(store, id, status->record);
    return fail(
        Status::BadInput("experiment " + std::to_string(id) + " was killed; it cannot be resumed"));
  }
  std::string moved;
  auto config = stored_config(status->record, store, &moved);
  if (!config.ok()) return fail(config.status());
  // Another machine, or one with fewer cores, may not fit the experiment any more: say so
  // before anything about resuming is printed or written. (The coordinator checks again.)
  const int slots = recorded_slots(status->record);
  // The agents it ran on, asked again (one that does not answer is tried while it runs).
  std::vector<std::string> recorded_peers;
  for (const Json& peer : status->record.value("peers", Json::array()))
    if (peer.is_string()) recorded_peers.push_back(peer.get<std::string>());
  const std::string key_file = key_override.empty() ? status->record.value("key_file", "")
                                                    : fs::absolute(key_override).string();
  const bool run_locally = status->record.value("run_locally", true);
  auto peers = check_peer_addresses(recorded_peers, key_file, /*require_all=*/false);
  if (!peers.ok()) return fail(peers.status());
  const int gpus = usable_gpus(*config);
  if (Status st = check_cluster_resources(
          *config, gpus, run_locally ? machine_slots(slots, gpus) : 0, peers->slots);
      !st.ok()) {
    // Why an agent offered nothing; when the resume goes on, its coordinator says it instead
    // (once: both said it before).
    for (const std::string& warning : peers->warnings)
      std::cerr << "cairn: warning: " << warning << "\n";
    return fail(st);
  }
  if (!moved.empty()) {
    std::cout << "cairn: " << moved << std::endl;
    // Data too large to keep is read through links in the run directory, which follow the
    // move when the data lies inside the project (engine/coordinator/provenance.cc); a link made
    // before they did, or to data that did not move with the project, may no longer find it.
    const fs::path run_dir = store.experiment(id) / "code";
    std::error_code ec;
    for (const std::string& entry : config->data)
      if (!fs::path(entry).is_absolute() && fs::is_directory(run_dir, ec) &&
          !fs::exists(run_dir / entry, ec))
        std::cerr << "cairn: warning: its trials read the data " << entry << " through "
                  << (run_dir / entry).string() << ", which no longer finds it\n";
  }
  auto db = ExperimentDb::open(store.experiment(id), ExperimentDb::Mode::kWrite, store.tmp());
  if (!db.ok()) return fail(db.status());
  std::cout << "cairn: resuming experiment " << id << " '" << status->record.value("name", "")
            << "' (" << state << ")" << std::endl;
  CoordinatorOptions options;
  options.self_executable = self_executable();
  options.resume = true;
  options.slots = slots;
  options.peers = std::move(recorded_peers);
  options.key_file = key_file;
  options.run_locally = run_locally;
  auto markers = notify_markers(**db);
  if (!markers.ok()) return fail(markers.status());
  std::unique_ptr<WebhookSender> webhooks =
      make_webhook_sender(config->notify, webhook_spool(store, id), std::move(*markers));
  options.notifier = webhooks.get();
  Coordinator coordinator(store, std::move(*db), std::move(*config), status->record, options);
  const int code = coordinator.run();
  if (webhooks) webhooks->drain(kWebhookDrainLimit);
  return code;
}

// Every experiment whose driver died (ACTIVE, not driven) is resumed in the background, each
// by its own detached process. Deliberately paused experiments stay paused.
int resume_all(const StoreLayout& store, const std::string& key_override) {
  int resumed = 0, delivering = 0;
  int exit_code = 0;
  for (int64_t id : list_experiment_ids(store)) {
    auto status = experiment_status(store, id);
    // One being created has no record yet; one that cannot be read is reported, not passed
    // over as if there were nothing to resume.
    if (!status.ok() && status.status().kind() != ErrorKind::kNotFound)
      exit_code = fail(status.status());
    if (!status.ok() || status->driven) continue;
    const std::string state = status->record.value("state", "");
    // An experiment that ended with notifications undelivered gets them delivered, in the
    // background too; a paused one waits for its own resume.
    if (state != "ACTIVE" && state != "PAUSED" && has_pending_webhooks(webhook_spool(store, id))) {
      pid_t pid = ::fork();
      if (pid < 0) return fail(Status::Io("fork: " + errno_text()));
      if (pid == 0) {
        start_session_with_output(store.experiment(id) / "coordinator.log");
        deliver_pending_notifications(store, id, status->record);
        ::_exit(0);
      }
      ++delivering;
      continue;
    }
    if (state != "ACTIVE") continue;
    std::cout << id << std::endl;
    pid_t pid = ::fork();
    if (pid < 0) return fail(Status::Io("fork: " + errno_text()));
    if (pid == 0) {
      start_session_with_output(store.experiment(id) / "coordinator.log");
      ::_exit(resume_one(store, id, key_override));
    }
    ++resumed;
  }
  std::cerr << "cairn: resumed " << resumed << " interrupted experiment(s) in the background\n";
  if (delivering > 0)
    std::cerr << "cairn: delivering the undelivered notifications of " << delivering
              << " ended experiment(s) in the background\n";
  return exit_code;
}

}  // namespace

void add_resume(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  auto key_file = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("resume", "Continue an interrupted or paused experiment where it stopped");
  auto* id_opt = cmd->add_option("id", *id, "Experiment id")->type_name("EXP");
  cmd->add_flag("--all", *all,
                "Resume every interrupted experiment in the background (for boot time)")
      ->excludes(id_opt);
  cmd->add_option("--key-file", *key_file,
                  "Cluster key for the experiment's agents (default: the one its run named, else "
                  "CAIRN_KEY_FILE, else $XDG_CONFIG_HOME/cairn/cluster.key or "
                  "~/.config/cairn/cluster.key)")
      ->type_name("FILE");
  cmd->callback([&global, &outcome, id, all, key_file] {
    keep_driving_without_stdout();
    auto store = open_store(global);
    if (!store.ok()) {
      outcome.exit_code = fail(store.status());
      return;
    }
    if (*all) {
      outcome.exit_code = resume_all(*store, *key_file);
      return;
    }
    auto parsed = parse_id(*id);
    if (id->empty() || !parsed.ok() || parsed->trial) {
      outcome.exit_code = fail(Status::BadInput("resume needs an experiment id (or --all)"));
      return;
    }
    outcome.exit_code = resume_one(*store, parsed->experiment, *key_file);
  });
}

}  // namespace cairn::cli
