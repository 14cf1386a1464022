// `cairn pause EXP` / `cairn kill EXP`: stop an experiment, resumably or for good.
#include <signal.h>

#include <iostream>
#include <utility>
#include <vector>

#include "cli/experiment_control.h"
#include "engine/coordinator/trial_process.h"
#include "store/experiment_db.h"
#include "store/schema.h"

namespace cairn::cli {

namespace {

constexpr int kStopTimeoutS = 600;

// The processes a trial record names, with their start times: every rank's, or the chief's.
std::vector<std::pair<pid_t, uint64_t>> recorded_processes(const Json& t) {
  std::vector<std::pair<pid_t, uint64_t>> out;
  const Json pids = t.value("rank_pids", Json::array());
  const Json starts = t.value("rank_start_times", Json::array());
  for (size_t k = 0; k < pids.size() && k < starts.size(); ++k)
    if (pids[k].is_number_integer() && starts[k].is_number_integer())
      out.emplace_back(pids[k].get<pid_t>(), starts[k].get<uint64_t>());
  if (out.empty() && t.value("pid", Json()).is_number_integer())
    out.emplace_back(t["pid"].get<pid_t>(), t.value("process_start_time", uint64_t{0}));
  return out;
}

// An experiment with no live driver: change its records directly.
int mark_undriven(const StoreLayout& store, int64_t id, const char* state) {
  auto db = ExperimentDb::open(store.experiment(id), ExperimentDb::Mode::kWrite, store.tmp());
  if (!db.ok()) return fail(db.status());
  auto exp = (*db)->get_json(schema::kExperiment);
  if (!exp.ok() || !exp->has_value())
    return fail(exp.ok() ? Status::NotFound("no experiment record") : exp.status());
  Json record = **exp;
  StoreBatch batch;
  const bool cancel = std::string(state) == "CANCELED";
  Status scan =
      (*db)->scan(schema::kTrialPrefix, [&](std::string_view key, std::string_view value) {
        Json t = Json::parse(value, nullptr, false);
        if (t.is_discarded()) return true;
        const std::string s = t.value("state", "");
        if (schema::trial_has_ended(s)) return true;
        // The processes left behind by a coordinator that died (every rank of a data-parallel
        // trial, and what each started in its process group) are stopped too, when killing.
        if (cancel && s == "RUNNING" && t.value("boot_id", "") == boot_id())
          for (const auto& [pid, start_time] : recorded_processes(t)) {
            if (same_process_alive(pid, start_time, boot_id())) ::kill(-pid, SIGKILL);
            kill_leftover_group(pid, start_time);
          }
        t["state"] = cancel ? "CANCELED" : (s == "RUNNING" ? "QUEUED" : s);
        batch.put_json(key, t);
        return true;
      });
  if (!scan.ok()) return fail(scan);
  record["state"] = state;
  record.erase("driver");
  batch.put_json(schema::kExperiment, record);
  Status st = (*db)->commit(batch, true);
  if (!st.ok()) return fail(st);
  std::cout << "cairn: experiment " << id << " " << state << "\n";
  return 0;
}

int stop(const GlobalOptions& global, const std::string& id_text, bool cancel) {
  auto id = parse_id(id_text);
  if (!id.ok()) return fail(id.status());
  if (id->trial)
    return fail(Status::BadInput("give an experiment id (" + std::to_string(id->experiment) +
                                 "), not a trial"));
  auto store = open_store(global);
  if (!store.ok()) return fail(store.status());
  auto status = experiment_status(*store, id->experiment);
  if (!status.ok()) return fail(status.status());
  const std::string state = status->record.value("state", "");
  const std::string exp = std::to_string(id->experiment);
  if (schema::experiment_has_ended(state)) {
    std::cout << "cairn: experiment " << exp << " is already " << state << "\n";
    return 0;
  }
  if (!status->driven) {
    if (!cancel && state == "PAUSED") {
      std::cout << "cairn: experiment " << exp << " is already PAUSED\n";
      return 0;
    }
    return mark_undriven(*store, id->experiment, cancel ? "CANCELED" : "PAUSED");
  }
  if (!status->driver)
    return fail(
        Status::Failed("experiment " + exp + " is driven by a process cairn cannot identify"));
  // The driver pauses on SIGINT (trials checkpoint and exit) and cancels on SIGUSR2.
  if (::kill(*status->driver, cancel ? SIGUSR2 : SIGINT) != 0)
    return fail(Status::Io("cannot signal process " + std::to_string(*status->driver) + ": " +
                           errno_text()));
  std::cout << "cairn: " << (cancel ? "killing" : "pausing") << " experiment " << exp
            << (cancel ? "" : " (trials checkpoint and exit)") << "..." << std::endl;
  // A trial stops at its next checkpoint_due(): one that calls it rarely (or never) keeps
  // the pause waiting, so say which trials it waits for rather than stay silent.
  auto still_waiting = [&] {
    auto reader = ExperimentReader::open(*store, id->experiment);
    if (!reader.ok()) return;
    auto trials = (*reader)->trials();
    if (!trials.ok()) return;
    std::string running;
    for (const Json& t : *trials)
      if (t.value("state", "") == "RUNNING")
        running += (running.empty() ? "" : ", ") + t.value("id", "");
    if (running.empty()) return;
    std::cout << "cairn: still waiting for trial"
              << (running.find(',') == std::string::npos ? " " : "s ") << running
              << ": a trial stops at its next checkpoint_due(); a second `cairn pause " << exp
              << "` stops it at once (it resumes from its latest checkpoint)" << std::endl;
  };
  if (!wait_until_undriven(*store, id->experiment, kStopTimeoutS,
                           cancel ? std::function<void()>() : still_waiting))
    return fail(Status::Failed("experiment " + exp + " did not stop within " +
                               std::to_string(kStopTimeoutS) + " s"));
  auto after = experiment_status(*store, id->experiment);
  std::cout << "cairn: experiment " << exp << " "
            << (after.ok() ? after->record.value("state", "") : "stopped") << "\n";
  return 0;
}

}  // namespace

void add_pause(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("pause", "Pause an experiment: trials checkpoint and exit; resumable");
  cmd->add_option("id", *id, "Experiment id")->required()->type_name("EXP");
  cmd->callback([&global, &outcome, id] { outcome.exit_code = stop(global, *id, false); });
}

void add_kill(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("kill", "Stop an experiment for good (its trials are killed)");
  cmd->add_option("id", *id, "Experiment id")->required()->type_name("EXP");
  cmd->callback([&global, &outcome, id] { outcome.exit_code = stop(global, *id, true); });
}

}  // namespace cairn::cli
