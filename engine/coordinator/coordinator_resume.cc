// Resuming an experiment whose coordinator stopped (paused, killed, power cut): the trials'
// records say where each trial stands, the event log rebuilds the searcher, and what trials
// did while no coordinator was listening (output, orphaned checkpoints) is taken in.
#include <algorithm>
#include <cmath>
#include <set>

#include "cairn/detail/checkpoint_files.hpp"
#include "common/file_util.h"
#include "common/metric_order.h"
#include "common/untrusted_json.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/metric_values.h"
#include "engine/coordinator/orphan_checkpoint.h"
#include "engine/coordinator/trial_state.h"
#include "store/checkpoint_files.h"
#include "store/schema.h"

namespace cairn {
namespace fs = std::filesystem;

Status Coordinator::replay_searcher(std::vector<SearcherAction>* unstarted) {
  // The searcher's first decisions are committed by start(), after the experiment's record
  // (cli/new_experiment.cc): a coordinator that died in between (kill -9, SIGPIPE before
  // the fix, a power cut) left an experiment whose search never started. Its trial_created
  // events say which: replaying start() then drops decisions that are not in the store.
  const std::vector<SearcherAction> first = searcher_->start();
  const double worst = MetricOrder(config_.searcher.smaller_is_better).worst();
  std::set<int64_t> recorded;  // trials with a trial_created event
  // Trials the replayed searcher created in reaction to a replayed event: each must have been
  // recorded in the same batch as that event.
  std::vector<int64_t> created_later;
  auto note_creations = [&](const std::vector<SearcherAction>& actions) {
    for (const SearcherAction& a : actions)
      if (a.kind == SearcherAction::Kind::kCreateTrial) created_later.push_back(a.trial);
  };
  Status bad = Status::Ok();
  Status st = db_->scan(schema::kEventPrefix, [&](std::string_view key, std::string_view value) {
    Json ev = Json::parse(value, nullptr, false);
    if (ev.is_discarded()) {
      bad = Status::Corrupt("store corrupt: event " + std::string(key) + " is not JSON");
      return false;
    }
    next_event_seq_ = std::max(next_event_seq_, ev.value("seq", int64_t{0}) + 1);
    const std::string type = ev.value("type", "");
    if (type == "trial_created") {
      recorded.insert(ev.value("trial", int64_t{0}));
    } else if (type == "searcher_validation") {
      const Json& m = ev["metric"];
      note_creations(searcher_->on_validation(ev["trial"].get<int64_t>(),
                                              ev["length"].get<int64_t>(),
                                              m.is_number() ? m.get<double>() : worst));
    } else if (type == "searcher_trial_closed") {
      note_creations(searcher_->on_trial_closed(ev["trial"].get<int64_t>()));
    }
    return true;
  });
  if (!st.ok()) return st;
  if (!bad.ok()) return bad;

  size_t first_recorded = 0, first_created = 0;
  for (const SearcherAction& a : first) {
    if (a.kind != SearcherAction::Kind::kCreateTrial) continue;
    ++first_created;
    if (recorded.count(a.trial)) ++first_recorded;
  }
  if (first_recorded == 0 && first_created > 0 && created_later.empty()) {
    // The search never started: the decisions an uninterrupted run made at its start.
    *unstarted = first;
    return Status::Ok();
  }
  // Anything else a crash can leave has the searcher's decisions and the trials' records in
  // one batch (commit()): a trial the searcher made without a record means the store was
  // changed behind cairn's back. Refused, rather than waiting forever for a trial that does
  // not exist.
  auto missing = [&](int64_t trial) {
    return Status::Corrupt("cannot resume: the searcher's event log created trial " +
                           trial_id(trial) +
                           ", but the store has no record of it (trial_created event); the "
                           "experiment's database is inconsistent");
  };
  for (const SearcherAction& a : first)
    if (a.kind == SearcherAction::Kind::kCreateTrial && !recorded.count(a.trial))
      return missing(a.trial);
  for (int64_t trial : created_later)
    if (!recorded.count(trial)) return missing(trial);
  return Status::Ok();
}

Status Coordinator::load_for_resume() {
  std::vector<SearcherAction> unstarted;
  Status replayed = replay_searcher(&unstarted);
  if (!replayed.ok()) return replayed;
  Status batches =
      db_->scan(schema::kTrainingBatchPrefix, [&](std::string_view key, std::string_view) {
        next_training_batch_seq_ =
            std::max(next_training_batch_seq_, schema::key_suffix_number(std::string(key)) + 1);
        return true;
      });
  if (!batches.ok()) return batches;
  Status bad = Status::Ok();
  Status st = db_->scan(schema::kTrialPrefix, [&](std::string_view key, std::string_view value) {
    Json record = Json::parse(value, nullptr, false);
    if (record.is_discarded()) {
      bad = Status::Corrupt("store corrupt: " + std::string(key) + " is not JSON");
      return false;
    }
    auto trial = std::make_unique<Trial>();
    trial->index = record.value("index", int64_t{0});
    trial->target = record.value("target_length", int64_t{0});
    trial->validated_target = record.value("validated_target", int64_t{0});
    trial->closed = record.value("closed", false);
    trial->finished = schema::trial_has_ended(record.value("state", ""));
    trial->log_seq = record.value("log_seq", int64_t{0});
    trial->latest_checkpoint_step = record.value("latest_checkpoint_steps", int64_t{-1});
    trial->record = std::move(record);
    add_trial(std::move(trial));
    return true;
  });
  if (!st.ok()) return st;
  if (!bad.ok()) return bad;
  if (!unstarted.empty()) {
    if (!trials_.empty())
      return Status::Corrupt(
          "cannot resume: the store has trial records but no trial_created "
          "events; the experiment's database is inconsistent");
    terminal_.note("the search had not started when the experiment was interrupted; starting it");
    apply(unstarted);
    return Status::Ok();
  }
  for (auto& [index, trial] : trials_) {
    if (trial->finished) continue;
    const Json& r = trial->record;
    // Processes of this trial (its ranks, for a data-parallel one) may have outlived the
    // coordinator: they were never told to stop and will checkpoint and exit by themselves.
    // Identified by pid, start time and boot id; the trial waits until all are gone. Whatever
    // its recorded state: `cairn pause` of an experiment whose driver died marks a RUNNING
    // trial QUEUED while its process may still run, and starting it again then would run
    // two processes of one trial at once.
    Json processes = Json::array();
    if (r.contains("rank_pids") && r.contains("rank_start_times")) {
      for (size_t k = 0; k < r["rank_pids"].size() && k < r["rank_start_times"].size(); ++k)
        processes.push_back({{"pid", r["rank_pids"][k]}, {"start_time", r["rank_start_times"][k]}});
    } else if (r.contains("pid")) {
      processes.push_back({{"pid", r["pid"]}, {"start_time", r.value("process_start_time", 0)}});
    }
    Json orphan{{"processes", processes}, {"boot_id", r.value("boot_id", "")}};
    if (orphan_alive(orphan)) {
      trial->orphan_process = std::move(orphan);
      trial->output_file =
          store_.trial_work(experiment_["id"].get<int64_t>(), index) / "output.log";
      (void)output_->follow(index, trial->output_file, r.value("output_offset", uint64_t{0}));
      const Json& left = trial->orphan_process->at("processes");
      std::string pids;
      for (const Json& p : left) pids += (pids.empty() ? "" : ", ") + p["pid"].dump();
      terminal_.note("trial " + trial_id(index) + ": waiting for its process" +
                     (left.size() > 1 ? "es " : " ") + pids +
                     ", left from the previous run, to checkpoint and exit");
      continue;
    }
    recover_trial(*trial);
  }
  return Status::Ok();
}

void Coordinator::recover_trial(Trial& trial) {
  const int64_t exp_id = experiment_["id"].get<int64_t>();
  // Output the process wrote after the last round the old coordinator committed.
  trial.output_file = store_.trial_work(exp_id, trial.index) / "output.log";
  std::error_code ec;
  if (fs::exists(trial.output_file, ec) &&
      output_
          ->follow(trial.index, trial.output_file, trial.record.value("output_offset", uint64_t{0}))
          .ok()) {
    drain_output(trial, /*final=*/true);
  }
  // The other ranks' likewise, where their offsets were recorded (a record from before
  // they were had none; their output since the last commit is not known to be unread).
  for (int rank = 1; rank < config_.resources.slots_per_trial; ++rank) {
    Worker worker;
    worker.rank = rank;
    worker.output_file =
        store_.trial_work(exp_id, trial.index) / ("output.rank" + std::to_string(rank) + ".log");
    worker.log_seq = trial.record.value("log_seq_rank" + std::to_string(rank), int64_t{0});
    const Json offset = trial.record.value(worker_offset_field(rank), Json());
    if (!offset.is_number_integer() || !fs::exists(worker.output_file, ec)) continue;
    if (output_
            ->follow(worker_output_key(trial.index, rank), worker.output_file,
                     offset.get<uint64_t>())
            .ok())
      drain_worker_output(trial, worker, /*final=*/true);
  }
  trial.orphan_process.reset();
  adopt_orphan_checkpoints(trial);
  // Not the trial's failure: the coordinator went away. It does not count as a restart.
  if (trial.record.value("state", "") == "RUNNING") {
    record_event("trial_interrupted", {{"trial", trial.index}});
    set_trial_state(trial, trial.target > trial.validated_target ? "QUEUED" : "PAUSED");
  }
  if (trial.closed) {
    trial.finished = true;
    set_trial_state(trial, trial.target >= config_.searcher.max_length ? "COMPLETED" : "STOPPED");
    close_in_searcher(trial);
  }
}

// Reports the trial made that no coordinator acknowledged (docs/protocol.md): training
// reports become one more batch (later batches win for a step), validations are recorded.
void Coordinator::adopt_orphan_metrics(Trial& trial, const fs::path& orphan) {
  if (auto lines = read_file(orphan / "cairn_orphan_metrics.jsonl");
      lines.ok() && !lines->empty()) {
    std::string batch = R"({"type":"training","reports":[)";
    bool first = true;
    size_t start = 0;
    while (start < lines->size()) {
      size_t nl = lines->find('\n', start);
      if (nl == std::string::npos) nl = lines->size();
      std::string_view line(lines->data() + start, nl - start);
      start = nl + 1;
      if (line.empty() || !parse_untrusted_json(line).ok()) continue;
      if (!first) batch += ',';
      batch += line;
      first = false;
    }
    batch += "]}";
    if (!first) store_training_batch(trial, batch);
  }
  if (auto lines = read_file(orphan / "cairn_orphan_validations.jsonl"); lines.ok()) {
    size_t start = 0;
    while (start < lines->size()) {
      size_t nl = lines->find('\n', start);
      if (nl == std::string::npos) nl = lines->size();
      Json report = parse_untrusted_json(std::string_view(lines->data() + start, nl - start))
                        .value_or(Json());
      start = nl + 1;
      if (!report.is_object() || !report.contains("step") || !report["step"].is_number_integer())
        continue;
      // Written by an SDK, so numbers; anything else is dropped as from a live trial.
      Json batch{{"reports", Json::array({report})}};
      if (std::vector<std::string> bad = drop_non_numeric_metrics(batch); !bad.empty())
        log_output(trial, "cairn: warning: orphan validation metric values dropped: " +
                              bad.front() + (bad.size() > 1 ? ", …" : "") + "\n");
      batch_.put_json(schema::metric_key(trial.index, schema::MetricKind::kValidation,
                                         report["step"].get<int64_t>()),
                      batch["reports"][0].value("metrics", Json::object()));
    }
  }
}

void Coordinator::adopt_orphan_checkpoints(Trial& trial) {
  const fs::path dir = store_.trial_work(experiment_["id"].get<int64_t>(), trial.index) / "orphans";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<std::pair<int64_t, fs::path>> complete;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    auto step = orphan_step(entry.path(), config_.resources.slots_per_trial);
    if (step.ok()) {
      complete.emplace_back(*step, entry.path());
      continue;
    }
    // Not finished (a rank was killed while writing it), and older than the latest one
    // registered or not: the trial resumes from the latest registered checkpoint.
    terminal_.warn("warning: trial " + trial_id(trial.index) + ": orphaned checkpoint " +
                   entry.path().filename().string() + " not adopted: " + step.status().message());
  }
  std::sort(complete.begin(), complete.end());
  for (const auto& [step, path] : complete) {
    if (step <= trial.latest_checkpoint_step) continue;
    // Rank 0's marker carries the metadata and says whether its metrics are complete.
    const Json marker =
        parse_untrusted_json(read_file(path / sdk_detail::orphan_marker_name(0)).value_or(""))
            .value_or(Json());
    adopt_orphan_metrics(trial, path);
    if (!marker.value("metrics_complete", true))
      terminal_.warn("warning: trial " + trial_id(trial.index) +
                     ": the trial could not keep all the reports it made while cairn was away; "
                     "some training metrics before step " +
                     std::to_string(step) + " are missing");
    for (const auto& f : fs::directory_iterator(path, ec))
      if (f.path().filename().string().starts_with("cairn_orphan")) fs::remove(f.path(), ec);
    bool has_files = false;
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file()) has_files = true;
    if (!has_files) {  // nothing but its marker: never offer an empty checkpoint
      terminal_.warn("warning: trial " + trial_id(trial.index) + ": orphaned checkpoint at step " +
                     std::to_string(step) + " holds no files; ignored");
      continue;
    }
    uint64_t new_bytes = 0;
    auto manifest =
        ingest_checkpoint_dir(objects_, path, {trial_id(trial.index), step}, &new_bytes);
    if (!manifest.ok()) {
      terminal_.warn("warning: trial " + trial_id(trial.index) + ": orphaned checkpoint at step " +
                     std::to_string(step) + " not adopted: " + manifest.status().message());
      continue;
    }
    register_checkpoint(trial, *manifest, step, new_bytes,
                        marker.value("metadata", Json::object()));
    terminal_.note("trial " + trial_id(trial.index) + ": adopted the checkpoint it took at step " +
                   std::to_string(step) + " while cairn was away");
  }
  fs::remove_all(dir, ec);
}

}  // namespace cairn
