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
#include "store/stored_records.h"

namespace cairn {
namespace fs = std::filesystem;
using schema::TrialState;

Status Coordinator::replay_event(
    std::string_view key, std::string_view value, std::set<int64_t>& created,
    const std::function<void(const std::vector<SearcherAction>&)>& decided) {
  using schema::EventType;
  auto ev = schema::read_event(key, value);
  if (!ev.ok()) return ev.status();
  next_event_seq_ = std::max(next_event_seq_, ev->seq + 1);
  if (!ev->type) return Status::Ok();  // written by a newer cairn: nothing the searcher saw
  switch (*ev->type) {
    case EventType::kTrialCreated: {
      auto trial = ev->integer("trial");
      if (!trial.ok()) return trial.status();
      created.insert(*trial);
      break;
    }
    case EventType::kSearcherValidation: {
      auto trial = ev->integer("trial");
      auto length = ev->integer("length");
      if (!trial.ok() || !length.ok()) return trial.ok() ? length.status() : trial.status();
      // A metric the trial reported as NaN or not at all was told to the searcher as the worst.
      const Json metric = ev->fields.value("metric", Json());
      const double worst = MetricOrder(config_.searcher.smaller_is_better).worst();
      decided(searcher_->on_validation(*trial, *length,
                                       metric.is_number() ? metric.get<double>() : worst));
      break;
    }
    case EventType::kSearcherTrialClosed: {
      auto trial = ev->integer("trial");
      if (!trial.ok()) return trial.status();
      decided(searcher_->on_trial_closed(*trial));
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

Status Coordinator::replay_searcher(std::vector<SearcherAction>* unstarted) {
  // The searcher's first decisions are committed by start(), after the experiment's record
  // (cli/new_experiment.cc): a coordinator that died in between (kill -9, SIGPIPE before
  // the fix, a power cut) left an experiment whose search never started. Its trial_created
  // events say which: replaying start() then drops decisions that are not in the store.
  const std::vector<SearcherAction> first = searcher_->start();
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
    bad = replay_event(key, value, recorded, note_creations);
    return bad.ok();
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

Status Coordinator::load_trial_records() {
  Status bad = Status::Ok();
  Status st = db_->scan(schema::kTrialPrefix, [&](std::string_view key, std::string_view value) {
    Json record = Json::parse(value, nullptr, false);
    auto head = record.is_discarded() ? Result<schema::TrialRecordHead>(Status::Corrupt(
                                            "store corrupt: " + std::string(key) + " is not JSON"))
                                      : schema::read_trial_record(key, record);
    if (!head.ok()) {
      bad = head.status();
      return false;
    }
    auto trial = std::make_unique<Trial>();
    trial->index = head->index;
    trial->target = head->target_length;
    trial->validated_target = head->validated_target;
    trial->closed = head->closed;
    trial->finished = schema::trial_has_ended(head->state);
    trial->latest_checkpoint_step = head->latest_checkpoint_steps;
    trial->state = head->state;
    trial->record = std::move(record);
    add_trial(std::move(trial));
    return true;
  });
  return st.ok() ? bad : st;
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
  if (Status loaded = load_trial_records(); !loaded.ok()) return loaded;
  if (!unstarted.empty()) {
    if (!trials_.empty())
      return Status::Corrupt(
          "cannot resume: the store has trial records but no trial_created "
          "events; the experiment's database is inconsistent");
    terminal_.note("the search had not started when the experiment was interrupted; starting it");
    apply(unstarted);
    finish_remote_adoption();
    return Status::Ok();
  }
  // Ranks on agents, in this order: the trials whose whole gang the agents kept running go
  // on (adopted: nothing to recover); the agents then end the kept ranks nobody adopted;
  // only then are the other trials' orphans on agents waited for and fetched (a trial being
  // adopted must not be waited on as an orphan), into the trials' orphans/ for recovery.
  for (auto& [index, trial] : trials_)
    if (!trial->finished) (void)adopt_remote_trial(*trial);
  finish_remote_adoption();
  take_remote_orphans();
  for (auto& [index, trial] : trials_)
    if (!trial->finished && !trial->running() && !trial->remote_orphan_wait &&
        !wait_for_orphan(*trial))
      recover_trial(*trial);
  return Status::Ok();
}

bool Coordinator::wait_for_orphan(Trial& trial) {
  const Json& r = trial.record;
  // Processes of this trial (its ranks, for a data-parallel one) may have outlived the
  // coordinator: they were never told to stop and will checkpoint and exit by themselves.
  // Identified by pid, start time and boot id; the trial waits until all are gone. Whatever
  // its recorded state: `cairn pause` of an experiment whose driver died marks a RUNNING
  // trial QUEUED while its process may still run, and starting it again then would run
  // two processes of one trial at once. (read_trial_record checked these fields' types.)
  Json processes = Json::array();
  if (r.contains("rank_pids") && r.contains("rank_start_times")) {
    for (size_t k = 0; k < r["rank_pids"].size() && k < r["rank_start_times"].size(); ++k)
      processes.push_back({{"pid", r["rank_pids"][k]}, {"start_time", r["rank_start_times"][k]}});
  } else if (r.contains("pid")) {
    processes.push_back({{"pid", r["pid"]}, {"start_time", r.value("process_start_time", 0)}});
  }
  Json orphan{{"processes", processes}, {"boot_id", r.value("boot_id", "")}};
  if (!orphan_alive(orphan)) return false;
  trial.orphan_process = std::move(orphan);
  (void)output_->follow(trial.index, trial.chief().output_file,
                        r.value("output_offset", uint64_t{0}));
  const Json& left = trial.orphan_process->at("processes");
  std::string pids;
  for (const Json& p : left) pids += (pids.empty() ? "" : ", ") + p["pid"].dump();
  terminal_.note("trial " + trial_id(trial.index) + ": waiting for its process" +
                 (left.size() > 1 ? "es " : " ") + pids +
                 ", left from the previous run, to checkpoint and exit");
  return true;
}

void Coordinator::recover_trial(Trial& trial) {
  // Output the processes wrote after the last round the old coordinator committed: rank 0's
  // from its recorded offset (0 when none), the other ranks' where their offsets were
  // recorded (a record from before they were had none; their output since the last commit
  // is not known to be unread).
  for (Rank& rank : trial.ranks) {
    std::error_code ec;
    const Json offset = trial.record.value(output_offset_field(rank.rank), Json());
    if (rank.rank > 0 && !offset.is_number_integer()) continue;
    const uint64_t from = offset.is_number_integer() ? offset.get<uint64_t>() : 0;
    if (fs::exists(rank.output_file, ec) &&
        output_->follow(rank_output_key(trial.index, rank.rank), rank.output_file, from).ok())
      drain_output(trial, rank, /*final=*/true);
  }
  trial.orphan_process.reset();
  adopt_orphan_checkpoints(trial);
  // Not the trial's failure: the coordinator went away. It does not count as a restart.
  if (trial.state == TrialState::kRunning) {
    record_event(schema::EventType::kTrialInterrupted, {{"trial", trial.index}});
    set_trial_state(
        trial, trial.target > trial.validated_target ? TrialState::kQueued : TrialState::kPaused);
  }
  if (trial.closed) {
    trial.finished = true;
    set_trial_state(trial, trial.target >= config_.searcher.max_length ? TrialState::kCompleted
                                                                       : TrialState::kStopped);
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
