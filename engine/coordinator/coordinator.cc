#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/one_answer_hook.h"
#include "engine/coordinator/remote_session.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common/build_info.h"
#include "common/file_util.h"
#include "engine/coordinator/launcher_choice.h"
#include "engine/coordinator/machine_resources.h"
#include "engine/coordinator/provenance.h"
#include "engine/coordinator/run_shipping.h"
#include "engine/coordinator/signal_pipe.h"
#include "engine/coordinator/trial_state.h"
#include "engine/search/replay_searcher.h"
#include "engine/search/searcher_factory.h"
#include "store/checkpoint_files.h"
#include "store/schema.h"
#include "store/stored_records.h"

namespace cairn {
namespace fs = std::filesystem;
using schema::TrialState;

namespace {

std::string now_iso8601() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Coordinator::Coordinator(StoreLayout store, std::unique_ptr<ExperimentDb> db,
                         ExperimentConfig config, Json experiment, CoordinatorOptions options)
    : store_(std::move(store)),
      db_(std::move(db)),
      objects_(store_.objects()),
      config_(std::move(config)),
      experiment_(std::move(experiment)),
      options_(std::move(options)) {
  // Slots are GPUs on a GPU machine (unless the config says cpu), CPU cores otherwise.
  const int gpus = usable_gpus(config_);
  gpu_slots_ = gpus > 0;
  gpu_names_ = gpu_names(gpus, std::getenv("CUDA_VISIBLE_DEVICES"));
  options_.slots = machine_slots(options_.slots, gpus);
  MachineInfo local;
  local.slots = options_.run_locally ? options_.slots : 0;
  local.gpu_names = gpu_names_;
  // What the agents are asked to keep when this process's connection to them drops.
  set_remote_session_options(
      {std::chrono::seconds(config_.reattach_window),
       session_owner(store_.root().string(), experiment_["id"].get<int64_t>()),
       /*adopt=*/options_.resume});
  Machines machines = connect_machines(std::move(local), options_.peers, options_.key_file);
  launcher_ = std::move(machines.launchers);
  machines_ = std::move(machines.info);
  machine_warnings_ = std::move(machines.warnings);
  std::vector<int> per_machine;
  for (const MachineInfo& machine : machines_) per_machine.push_back(machine.slots);
  slots_.emplace(per_machine);
  for (int m = 1; m < launcher_->size(); ++m)
    if (launcher_->lost(m)) slots_->set_available(m, false);
}

Coordinator::~Coordinator() = default;

std::string Coordinator::trial_id(int64_t index) const {
  return std::to_string(experiment_["id"].get<int64_t>()) + "." + std::to_string(index);
}

Trial* Coordinator::trial_by_index(int64_t index) {
  auto it = trials_.find(index);
  return it == trials_.end() ? nullptr : it->second.get();
}

Trial* Coordinator::running_trial_by_id(const std::string& id) {
  // "EXP.INDEX": looked up by its index, not by formatting every trial's id.
  const size_t dot = id.rfind('.');
  if (dot == std::string::npos) return nullptr;
  int64_t index = 0;
  const char* first = id.data() + dot + 1;
  const char* last = id.data() + id.size();
  auto [end, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || end != last) return nullptr;
  Trial* trial = trial_by_index(index);
  return trial && trial->running() && trial_id(index) == id ? trial : nullptr;
}

void Coordinator::add_trial(std::unique_ptr<Trial> trial) {
  const int64_t index = trial->index;
  // Its gang: where each rank's output goes and how much of it the log holds.
  const fs::path work = store_.trial_work(experiment_["id"].get<int64_t>(), index);
  trial->ranks.resize(static_cast<size_t>(std::max(1, config_.resources.slots_per_trial)));
  for (size_t r = 0; r < trial->ranks.size(); ++r) {
    Rank& rank = trial->ranks[r];
    rank.rank = static_cast<int>(r);
    rank.output_file = rank_output_file(work, rank.rank);
    const Json seq = trial->record.value(log_seq_field(rank.rank), Json());
    rank.log_seq = seq.is_number_integer() ? seq.get<int64_t>() : 0;
  }
  if (!trial->finished)
    live_.insert(index);
  else
    tally_finished(*trial);
  trials_[index] = std::move(trial);
}

void Coordinator::mark_dirty(Trial& trial) {
  dirty_.insert(trial.index);
}

std::vector<Trial*> Coordinator::live_trials() const {
  std::vector<Trial*> out;
  out.reserve(live_.size());
  for (int64_t index : live_) {
    auto it = trials_.find(index);
    if (it != trials_.end() && !it->second->finished) out.push_back(it->second.get());
  }
  return out;
}

void Coordinator::record_event(schema::EventType type, Json fields) {
  fields["type"] = schema::event_type_name(type);
  fields["time"] = now_iso8601();
  Json ordered = Json{{"seq", next_event_seq_}};
  ordered.update(fields);
  batch_.put_json(schema::event_key(next_event_seq_++), ordered);
  batch_needs_sync_ = true;
}

void Coordinator::reply(ControlConnection& conn, Json message) {
  reply_to(conn.fd(), std::move(message));
}

void Coordinator::reply_to(int fd, Json message) {
  if (message.contains("re")) rank_answered(fd);
  deferred_replies_.emplace_back(fd, std::move(message));
}

void Coordinator::set_trial_state(Trial& trial, TrialState to) {
  const char* state = schema::trial_state_name(to);
  if (trial.state == to) return;
  trial.state = to;
  mark_dirty(trial);
  record_event(schema::EventType::kTrialState, {{"trial", trial.index}, {"state", state}});
}

Status Coordinator::commit() {
  if (searcher_changed_ && searcher_) {
    // What `show` and `watch` display of the search: brackets, rungs, best so far. Its own
    // record: rewriting the experiment's (kilobytes of config and provenance) every round
    // that a trial validates or ends was most of what a trivial trial wrote.
    batch_.put_json(schema::kSearcherState, searcher_->describe());
    searcher_changed_ = false;
  }
  for (int64_t index : dirty_)
    if (Trial* trial = trial_by_index(index)) {
      schema::write_trial_record(trial->head(), trial->record);
      batch_.put_json(schema::trial_key(index), trial->record);
    }
  dirty_.clear();
  // Finished trials leave the live set only now, after their final record is in the batch.
  std::erase_if(live_, [&](int64_t index) {
    const Trial* trial = trial_by_index(index);
    if (trial && trial->finished) tally_finished(*trial);
    return !trial || trial->finished;
  });
  // Synced when the round recorded an event or a validation: every reply that acknowledges
  // a report (validation, checkpoint) and every decision a reply passes on (a length to
  // train to, a stop) records an event in the same round. Replies that promise nothing
  // (welcome, an answer already decided and durable, errors) no longer force an fsync.
  Status st = db_->commit(batch_, batch_needs_sync_);
  batch_needs_sync_ = false;
  if (!st.ok()) {
    notify_outbox_.commit_failed();
    return st;
  }
  notify_outbox_.committed();  // the notifications this batch's changes report may go
  batch_has_checkpoint_ = false;
  // Only now, with the batch durable, may the trials hear that their reports are safe.
  for (auto& [fd, message] : deferred_replies_) {
    auto it = connections_.find(fd);
    if (it != connections_.end()) {
      it->second->send(message);
      it->second->flush();
    }
  }
  deferred_replies_.clear();
  hold_if_testing();  // tests only: a kill between the answers of one round (one_answer_hook.h)
  std::error_code ec;
  for (const auto& dir : staging_to_remove_) std::filesystem::remove_all(dir, ec);
  staging_to_remove_.clear();
  return Status::Ok();
}

int trial_concurrency(const ExperimentConfig& config, int slots) {
  int concurrency = std::max(1, slots / std::max(1, config.resources.slots_per_trial));
  if (config.searcher.max_concurrent_trials > 0)
    concurrency = std::min(concurrency, config.searcher.max_concurrent_trials);
  return concurrency;
}

Result<std::unique_ptr<Searcher>> Coordinator::create_searcher() const {
  if (experiment_.contains("reproduces")) {
    // `cairn reproduce`: the recorded trial's hyperparameters, seed and lengths, replayed.
    auto plan = replay_plan_from_json(experiment_["reproduces"]);
    if (!plan.ok()) return plan.status();
    return std::unique_ptr<Searcher>(std::make_unique<ReplaySearcher>(std::move(*plan)));
  }
  return make_searcher(config_, experiment_["seed"].get<uint64_t>(),
                       experiment_["concurrency"].get<int>());
}

Status Coordinator::start() {
  // `cairn run`, `reproduce` and `resume` checked this already, before creating or changing
  // anything; again here, with the slots this coordinator really has, before it writes.
  const int gpus = static_cast<int>(gpu_names_.size());
  for (const std::string& warning : machine_warnings_)
    terminal_.warn("warning: " + warning + "; its slots are not used until it answers");
  std::vector<PeerSlots> peers;
  for (size_t m = 1; m < machines_.size(); ++m)
    peers.push_back({machines_[m].address, machines_[m].slots, !machines_[m].gpu_names.empty()});
  if (Status st = check_cluster_resources(config_, gpus, machines_[0].slots, peers); !st.ok())
    return st;
  // The concurrency shapes when a searcher creates trials, so it is part of the searcher's
  // state: fixed when the experiment is created and reused on every resume.
  // A resume of an experiment whose search never started (no first commit) decides it
  // now, from the slots its `run` was given (`slots`, recorded with the experiment).
  if (!experiment_.contains("concurrency"))
    experiment_["concurrency"] =
        trial_concurrency(config_, machines_.size() > 1 || !options_.run_locally
                                       ? slots_->size()
                                       : experiment_.value("slots", options_.slots));
  auto run_dir =
      prepare_run_directory(store_, experiment_["id"].get<int64_t>(), experiment_, config_);
  if (!run_dir.ok()) return run_dir.status();
  run_dir_ = *run_dir;
  auto run_source = make_run_source(store_, experiment_, config_, run_dir_);
  if (!run_source.ok()) return run_source.status();
  run_source_ = std::move(*run_source);
  launcher_->prepare(run_source_);
  auto searcher = create_searcher();
  if (!searcher.ok()) return searcher.status();
  searcher_ = std::move(*searcher);
  auto listener =
      ControlListener::listen(store_.tmp(), "control-" + experiment_["id"].dump() + "-" +
                                                std::to_string(::getpid()) + ".sock");
  if (!listener.ok()) return listener.status();
  listener_.emplace(std::move(*listener));
  auto output = OutputTail::create();
  if (!output.ok()) return output.status();
  output_.emplace(std::move(*output));
  // Who drives the experiment, so `cairn pause`/`kill` can reach this process and a later
  // `resume` can tell a live driver from a dead one.
  experiment_["driver"] = {{"pid", ::getpid()},
                           {"start_time", process_start_time(::getpid()).value_or(0)},
                           {"boot_id", boot_id()}};
  experiment_["state"] = schema::experiment_state_name(schema::ExperimentState::kActive);
  experiment_.erase("searcher_state");  // a store from before it had its own record
  searcher_changed_ = true;             // so the search state's record exists from now on
  batch_.put_json(schema::kExperiment, experiment_);
  if (options_.resume) {
    Status st = Status::Ok();
    // The records' fields are checked as they are read (store/stored_records.h); this catches
    // what a check missed (a record nested deeper than the checks look), so that a damaged
    // store is still a clear error, not a crash.
    try {
      st = load_for_resume();
    } catch (const Json::exception& e) {
      st = Status::Corrupt(std::string("store corrupt: a record cairn resumes from has a field of "
                                       "the wrong type (") +
                           e.what() + "); `cairn doctor` checks the store");
    }
    if (!st.ok()) return st;
    record_event(schema::EventType::kExperimentResumed, {{"pid", ::getpid()}});
  } else {
    apply(searcher_->start());
  }
  return commit();
}

void Coordinator::close_in_searcher(Trial& trial) {
  record_event(schema::EventType::kSearcherTrialClosed, {{"trial", trial.index}});
  apply(searcher_->on_trial_closed(trial.index));
}

void Coordinator::apply(const std::vector<SearcherAction>& actions) {
  searcher_changed_ = true;
  for (const SearcherAction& action : actions) {
    switch (action.kind) {
      case SearcherAction::Kind::kCreateTrial: {
        auto trial = std::make_unique<Trial>();
        trial->index = action.trial;
        trial->record = Json{{"id", trial_id(action.trial)}, {"index", action.trial},
                             {"hparams", action.hparams},    {"seed", action.seed},
                             {"steps_completed", 0},         {"restarts", 0},
                             {"best_validation", nullptr},   {"latest_checkpoint", nullptr},
                             {"created_at", now_iso8601()}};
        mark_dirty(*trial);
        Json event{{"trial", action.trial}, {"hparams", action.hparams}, {"seed", action.seed}};
        if (action.parent > 0) {
          // A clone: it starts from its parent's checkpoint at parent_length units.
          trial->record["parent"] = {{"trial", trial_id(action.parent)},
                                     {"index", action.parent},
                                     {"step", action.parent_length}};
          event["parent"] = action.parent;
          event["parent_length"] = action.parent_length;
        }
        // `cairn reproduce` of a clone: from the same parent checkpoint.
        if (experiment_.contains("reproduces"))
          adopt_replayed_parent(experiment_["reproduces"], trial->record);
        record_event(schema::EventType::kTrialCreated, std::move(event));
        Trial& created = *trial;
        add_trial(std::move(trial));
        if (action.parent > 0) resolve_parent_checkpoint(created);
        break;
      }
      case SearcherAction::Kind::kTrain: {
        Trial* trial = trial_by_index(action.trial);
        if (!trial) break;
        trial->target = action.length;
        if (trial->finished) break;  // errored meanwhile: nothing to train
        if (trial->state == TrialState::kPaused && !pausing_)
          set_trial_state(*trial, TrialState::kQueued);
        mark_dirty(*trial);
        record_event(schema::EventType::kTrain,
                     {{"trial", action.trial}, {"length", action.length}});
        answer_pending_operation(*trial);
        break;
      }
      case SearcherAction::Kind::kClose: {
        Trial* trial = trial_by_index(action.trial);
        if (!trial) break;
        trial->closed = true;
        mark_dirty(*trial);
        record_event(schema::EventType::kClose, {{"trial", action.trial}});
        answer_pending_operation(*trial);
        if (!trial->running() && !trial->finished && !trial->orphan_process &&
            !trial->remote_orphan_wait) {
          trial->finished = true;
          set_trial_state(*trial, trial->target >= config_.searcher.max_length
                                      ? TrialState::kCompleted
                                      : TrialState::kStopped);
          close_in_searcher(*trial);
        }
        break;
      }
    }
  }
}

int Coordinator::slots_free() const {
  int running = 0;
  for (const Trial* trial : live_trials())
    if (trial->running()) ++running;
  int free = slots_->free();
  if (config_.searcher.max_concurrent_trials > 0)
    free = std::min(free, (config_.searcher.max_concurrent_trials - running) *
                              config_.resources.slots_per_trial);
  return free;
}

void Coordinator::schedule() {
  if (pausing_) return;
  const auto now = Clock::now();
  for (Trial* trial : live_trials()) {
    const int64_t index = trial->index;
    if (trial->finished || trial->running() || trial->closed || now < trial->not_before) continue;
    if (trial->remote_orphan_wait) {
      // Its ranks on agents checkpoint and exit first; then recovery adopts what they left.
      if (settle_remote_orphans(*trial)) recover_trial(*trial);
      continue;
    }
    if (trial->orphan_process) {
      if (orphan_alive(*trial->orphan_process)) continue;
      // Children it left running in its group would run beside the trial started again.
      if (trial->orphan_process->value("boot_id", "") == boot_id())
        for (const Json& p : trial->orphan_process->value("processes", Json::array()))
          kill_leftover_group(p.value("pid", 0), p.value("start_time", uint64_t{0}));
      recover_trial(*trial);
      // What recovery adopted (an orphaned checkpoint) is in this round's batch, not yet in
      // the database that restore reads: start the trial next round, after the commit.
      continue;
    }
    if (trial->target <= trial->validated_target) continue;  // waiting for the searcher
    if (!parent_checkpoint_ready(*trial)) continue;
    if (transfers_ && transfers_->busy(index)) continue;  // a checkpoint still on the wire
    if (slots_free() < config_.resources.slots_per_trial) return;
    Status st = start_trial(*trial);
    if (!st.ok() && st.kind() == ErrorKind::kIo) {
      // The store failed (a full disk while restoring its checkpoint, an I/O error), not the
      // trial: marking it ERROR would end an experiment that a resume can continue once the
      // disk has room. Stop as after a failed commit; the experiment stays ACTIVE.
      const std::string exp = experiment_["id"].dump();
      fatal_ = Status::Io("trial " + trial_id(index) + " cannot start: " + st.message() +
                          "; the experiment stays ACTIVE (`cairn resume " + exp +
                          "` once that is fixed)");
      return;
    }
    if (!st.ok()) {
      terminal_.warn("error: trial " + trial_id(index) + ": " + st.message());
      trial->record["error"] = st.message();
      trial->finished = true;
      set_trial_state(*trial, TrialState::kError);
      close_in_searcher(*trial);
      notify_trial_error(*trial, st.message());
    }
  }
}

}  // namespace cairn
