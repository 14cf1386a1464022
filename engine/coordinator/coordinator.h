// The coordinator drives one experiment to its end (DESIGN.md, "The flow of one
// experiment"). It is a single-threaded event loop: it owns the searcher, the trial
// processes and their control connections, and reacts to events — a control message, trial
// output, a process exit, a signal, a timer. Writes made while handling one round of events
// are committed as one RocksDB batch, and answers that promise durability (validation and
// checkpoint acks) are sent only after that batch is on disk.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/config/config.h"
#include "engine/config/log_policy_matcher.h"
#include "engine/coordinator/checkpoint_transfers.h"
#include "engine/coordinator/control_channel.h"
#include "engine/coordinator/launcher.h"
#include "engine/coordinator/launcher_choice.h"
#include "engine/coordinator/notify_outbox.h"
#include "engine/coordinator/output_tail.h"
#include "engine/coordinator/signal_pipe.h"
#include "engine/coordinator/slot_pool.h"
#include "engine/coordinator/status_tally.h"
#include "engine/coordinator/terminal.h"
#include "engine/coordinator/trial_process.h"
#include "engine/search/searcher.h"
#include "store/checkpoint_files.h"
#include "store/experiment_db.h"
#include "store/object_store.h"
#include "store/schema.h"
#include "store/store_location.h"
#include "store/stored_records.h"

namespace cairn {

class Notifier;

struct CoordinatorOptions {
  int slots = 0;                // 0: the number of CPU cores
  std::string self_executable;  // re-executed for builtin:mlp
  bool resume = false;          // continue an experiment from its records and event log
  // false with `--slots 0`: ranks run on the peers only.
  bool run_locally = true;
  // --peers / resources.peers, --key-file: the agents ranks may also run on
  // (launcher_choice.h, docs/peers.md "Placement").
  std::vector<std::string> peers;
  std::string key_file;
  // Where the events `notify.on` asks for go (notifier.h); not owned; null: nowhere.
  Notifier* notifier = nullptr;
};

// How many trials run at once: the slots divided among trials, capped by
// searcher.max_concurrent_trials.
int trial_concurrency(const ExperimentConfig& config, int slots);

// The coordinator's run-time state of one trial and of its ranks (defined in
// engine/coordinator/trial_state.h, which the coordinator's own files include).
struct Trial;
struct Rank;
struct RankRound;
struct TrialEnvironment;
struct AttemptEnd;
struct AttemptDecision;

class Coordinator {
 public:
  Coordinator(StoreLayout store, std::unique_ptr<ExperimentDb> db, ExperimentConfig config,
              Json experiment, CoordinatorOptions options);
  ~Coordinator();

  // Drives the experiment until it completes, errors or is paused. Returns the exit status
  // of `cairn run`: 0 completed or paused, 1 when the experiment ended in ERROR.
  int run();

 private:
  using Clock = std::chrono::steady_clock;

  Status start();
  // The experiment's searcher: its config's, or `cairn reproduce`'s replay of one trial.
  Result<std::unique_ptr<Searcher>> create_searcher() const;
  Status load_for_resume();
  // Reads every trial record into trials_ (store/stored_records.h checks their fields).
  Status load_trial_records();
  // Processes of the trial that outlived the previous coordinator: if any still runs, the
  // trial waits for it (orphan_process) and true is returned.
  bool wait_for_orphan(Trial& trial);
  // Ranks of unfinished trials on agents (their last placement) that outlived the previous
  // coordinator: waits (bounded) until they have checkpointed and exited there, and fetches
  // their orphan checkpoints into the trials' orphans/ for adopt_orphan_checkpoints
  // (coordinator_remote_orphans.cc, remote_orphans.h).
  // Trials whose ranks still run there are waited for on a thread of their own
  // (remote_orphan_wait.h, Trial::remote_orphan_wait) while the loop starts the others:
  // settle_remote_orphans says whether a trial's wait ended (then its orphans were fetched);
  // stop_remote_orphan_waits ends the waits (the loop stops: pause, Ctrl-C).
  void take_remote_orphans();
  bool settle_remote_orphans(Trial& trial);
  void stop_remote_orphan_waits();
  void fetch_remote_orphans(Trial& trial);
  struct RemoteOrphans;
  std::shared_ptr<RemoteOrphans> remote_orphans_;  // what take_remote_orphans asked
  // Feeds the searcher the logged events. `unstarted`: the searcher's first decisions when the
  // store holds none of them (the coordinator died before its first commit), to be applied.
  Status replay_searcher(std::vector<SearcherAction>* unstarted);
  // One logged event, fed to the searcher if it is one the searcher saw: `created` collects
  // the trials with a trial_created event, `decided` what the searcher decides in reaction.
  Status replay_event(std::string_view key, std::string_view value, std::set<int64_t>& created,
                      const std::function<void(const std::vector<SearcherAction>&)>& decided);
  void recover_trial(Trial& trial);
  // A trial whose gang still runs on agents at its recorded attempt, kept there since the
  // previous coordinator was killed, goes on with the same processes: true when it was
  // adopted (coordinator_adoption.cc). finish_remote_adoption() then tells each agent which
  // of its kept ranks were taken (it ends the others).
  bool adopt_remote_trial(Trial& trial);
  void finish_remote_adoption();
  // Whether the trial's current attempt is one adopt_remote_trial took.
  bool adopted_attempt(const Trial& trial) const;
  void adopt_orphan_checkpoints(Trial& trial);
  void adopt_orphan_metrics(Trial& trial, const std::filesystem::path& orphan);
  void register_checkpoint(Trial& trial, const CheckpointManifest& manifest, int64_t step,
                           uint64_t new_bytes, const Json& metadata);
  // A clone (pbt: record "parent") gets its parent's checkpoint at the step it was cloned at
  // as "parent_checkpoint", once the parent has registered it.
  void resolve_parent_checkpoint(Trial& child);
  // Whether a clone may start: its parent checkpoint is known (or the parent ended without
  // one). Trials that are not clones are always ready.
  bool parent_checkpoint_ready(Trial& child);
  void close_in_searcher(Trial& trial);
  void cancel();
  void check_liveness();
  void apply_retention();
  void apply(const std::vector<SearcherAction>& actions);
  void schedule();
  Status start_trial(Trial& trial);
  // What every rank of the trial's next attempt gets (rank_environment.h), with the latest
  // checkpoint restored for it.
  Result<TrialEnvironment> trial_environment(Trial& trial);
  Status restore_latest_checkpoint(Trial& trial, TrialEnvironment& env);
  // A clone without a checkpoint of its own: its parent checkpoint, materialized at `dest`.
  Status restore_parent_checkpoint(Trial& trial, const std::filesystem::path& dest,
                                   TrialEnvironment& env);
  // Materializes checkpoint `id` (of `steps` units) at `dest` for the trial's next attempt;
  // kCorrupt when its content is damaged (the caller falls back).
  Status restore_checkpoint(Trial& trial, const std::string& id, int64_t steps,
                            const std::filesystem::path& dest, TrialEnvironment& env);
  // Starts every rank of the trial through the launcher; a rank > 0 that cannot start fails
  // the attempt (its gang is stopped), rank 0's failure is the start's.
  Status start_ranks(Trial& trial, const TrialEnvironment& env);
  // The trial's record and event once its ranks are started.
  void record_start(Trial& trial);
  void poll_once();
  void accept_connections();
  void read_connection(int fd);
  void handle_line(ControlConnection& conn, const std::string& line);
  // Returns what was not stored (non-numeric metric values, said once per metric and trial),
  // empty when the whole batch was.
  std::string store_training_batch(Trial& trial, std::string_view batch_json);
  void tell_dropped_metrics(ControlConnection& conn, const std::string& problem);
  void handle_message(ControlConnection& conn, const Json& msg);
  void dispatch_message(ControlConnection& conn, const Json& msg);
  void handle_hello(ControlConnection& conn, const Json& msg);
  // The fd of the connection that speaks for `rank` of `trial`, -1 when it has none.
  int rank_connection_fd(const Trial& trial, int rank) const;
  void handle_next_operation(Trial& trial, ControlConnection& conn, const Json& msg);
  void handle_training(Trial& trial, ControlConnection& conn, const Json& msg);
  void handle_validation(Trial& trial, ControlConnection& conn, const Json& msg);
  // The trial's best validation and the checkpoint of `step` take in `metrics`. Returns the
  // searcher's metric among them when it is finite (said in the trial's log when not).
  std::optional<double> note_validation(Trial& trial, int64_t step, const Json& metrics);
  void handle_checkpoint_begin(Trial& trial, ControlConnection& conn, const Json& msg);
  void handle_checkpoint_end(Trial& trial, ControlConnection& conn, const Json& msg);
  void handle_checkpoint_abort(Trial& trial, const Json& msg);
  void answer_pending_operation(Trial& trial);
  // Whether rank 0 of the trial has not left this attempt (Rank::left), so that its
  // next_operation decides the gang's next operation (coordinator_messages.cc
  // handle_next_operation).
  bool decides_operations(const Trial& trial) const;
  // Answers rank `rank`'s next_operation `seq` with the gang's next operation for it.
  void answer_rank_operation(Trial& trial, Rank& rank, ControlConnection& conn, int64_t seq);
  // Answers the deferred requests (Rank::deferred_operation_seq) rank 0's have decided, or
  // all of them once rank 0 has left.
  void answer_deferred_operations(Trial& trial);
  // The answer to a trial's n-th next_operation in this attempt: decided at the first
  // rank's request, the same for every rank.
  Json operation_answer(Trial& trial, size_t n);
  void handle_sync(Trial& trial, ControlConnection& conn, const Json& msg);
  // Answers the sync round of `step` once every rank is in it.
  void decide_sync(Trial& trial, int64_t step);
  // A request a killed coordinator answered, replayed by an agent to the one that adopted
  // the rank (coordinator_replayed_answers.cc): its sync or checkpoint round is rebuilt.
  void handle_answered(Trial& trial, ControlConnection& conn, const Json& msg);
  // Data-parallel checkpoints: one staging directory per step for every rank, registered
  // once every rank has ended it.
  void handle_rank_checkpoint_begin(Trial& trial, ControlConnection& conn, const Json& msg);
  void handle_rank_checkpoint_end(Trial& trial, ControlConnection& conn, const Json& msg);
  void handle_rank_checkpoint_abort(Trial& trial, ControlConnection& conn, const Json& msg);
  // A rank made its next call for a step without entering checkpoint(step): it is not part
  // of that checkpoint; its random-generator state is stored with it.
  void handle_checkpoint_skip(Trial& trial, ControlConnection& conn, const Json& msg);
  // Every message of a rank of a multi-rank trial: what it now waits in, and which
  // checkpoints it has left (engine/coordinator/rank_waits.h). Before the message's handler.
  void note_rank_call(Trial& trial, int rank, const std::string& type, const Json& msg);
  // Registers (or fails) every checkpoint round all ranks are accounted for.
  void settle_checkpoint_rounds(Trial& trial);
  void finish_checkpoint_round(Trial& trial, int64_t step);
  // A request of the connection's rank was answered: it waits in nothing.
  void rank_answered(int fd);
  // Fails the attempt of a gang that is deadlocked or waited past rank_wait_timeout.
  void check_rank_waits();
  // The ranks' rendezvous table (engine/coordinator/coordinator_rendezvous.cc).
  void handle_kv_set(Trial& trial, ControlConnection& conn, const Json& msg);
  void handle_kv_get(Trial& trial, ControlConnection& conn, const Json& msg);
  // The experiment's best value of the searcher's metric so far (docs/protocol.md;
  // engine/coordinator/coordinator_best.cc).
  void handle_best_validation(ControlConnection& conn, const Json& msg);
  // coordinator_fetch.cc: any stored checkpoint, copied for the rank that asks.
  void handle_checkpoint_fetch(Trial& trial, ControlConnection& conn, const Json& msg);
  void finish_checkpoint_push(const CheckpointJobResult& done);
  void reply_to(int fd, Json message);
  // Checkpoints of a rank on an agent (coordinator_remote_checkpoints.cc). Each handler
  // returns false when the message is not one of those (the local path handles it).
  const AgentEndpoint* remote_chief(const Trial& trial, int rank) const;
  // A transfer job's common fields for the trial's current attempt (checkpoint_transfers.h).
  CheckpointJob transfer_job(CheckpointJob::Kind kind, const Trial& trial) const;
  bool remote_checkpoint_begin(Trial& trial, ControlConnection& conn, const Json& msg);
  bool remote_checkpoint_end(Trial& trial, ControlConnection& conn, const Json& msg);
  bool remote_checkpoint_abort(Trial& trial, const Json& msg);
  // Registers, acknowledges or refuses what the transfer threads finished.
  void finish_checkpoint_transfers();
  // A data-parallel checkpoint round with ranks on agents (coordinator_remote_rounds.cc).
  bool remote_round_begin(Trial& trial, RankRound& round, int64_t step, ControlConnection& conn,
                          const Json& msg);
  const std::string& round_dir_of(const Trial& trial, const RankRound& round, int rank) const;
  bool start_remote_round(Trial& trial, int64_t step, RankRound& done, std::string* failure);
  void finish_round_transfer(CheckpointJobResult& done);
  // Signals every rank's process group.
  void signal_ranks(Trial& trial, int sig);
  // A rank ended: the first failure stops the others; the trial ends with the last rank.
  void rank_exited(Trial& trial, Rank& rank, ExitInfo info);
  // Reads what the rank wrote since the last call into its log; `final`: it has ended.
  void drain_output(Trial& trial, Rank& rank, bool final);
  // drain_output() for an output key (rank_output_key) of a live trial.
  void drain_output_key(int64_t key);
  // The output files the launchers made since the last round (a remote rank's first byte):
  // followed from now on, and what they hold read.
  void follow_new_outputs();
  void log_rank_output(Trial& trial, Rank& rank, std::string_view chunk);
  // cairn's own lines about a trial, in rank 0's log.
  void log_output(Trial& trial, std::string_view chunk);
  // The ranks that ended (launcher_->take_exits()), each to its trial.
  void collect_exits();
  // Placement (coordinator_machines.cc): lost agents' slots withdrawn and the agents
  // connected again in the background; the machines a trial prefers (the one that ran it
  // last, which holds its checkpoint, then those that have the code); where its ranks run,
  // for the record and the event log; rank 0's machine as the others reach it.
  void watch_machines();
  // When machine `m`'s launcher says it cannot run this experiment (Launcher::refuses_run),
  // its slots are withdrawn for the rest of the run with one warning; true when the other
  // machines can still hold a trial (the one that failed to start waits for them).
  bool exclude_refusing_machine(int m);
  std::vector<int> preferred_machines(const Trial& trial) const;
  Json placement_json(const std::vector<SlotRef>& places) const;
  std::string master_address(const std::vector<SlotRef>& places) const;
  // A gang over machines: every machine of `places` reaches rank 0's at MASTER_ADDR (rank 0
  // here: a listener on MASTER_PORT while they try; on an agent: a port that agent holds free
  // on its machine, which becomes *master_port, also for a gang all on that agent;
  // coordinator_agent_rendezvous.cc), before any rank starts. The error names the machines
  // and why.
  Status check_rendezvous(const std::vector<SlotRef>& places, const std::string& master_addr,
                          int* master_port);
  Status check_agent_rendezvous(const std::vector<SlotRef>& places, const std::string& master_addr,
                                int* master_port);
  // "(pid 1234)" for a trial all here, else "on 10.0.0.2:7070" / "on local ×2, b:7070 ×1".
  std::string where_started(const Trial& trial) const;
  // The attempt ended (every rank has): its state, restart or error (exit_decision.h).
  // `permanent`: every rank that failed declared it so (declares_permanent): no restart.
  void handle_exit(Trial& trial, ExitInfo info, bool permanent);
  AttemptEnd attempt_end_facts(const Trial& trial, const ExitInfo& info, bool permanent) const;
  std::string failure_reason(const Trial& trial, const ExitInfo& info,
                             const std::optional<std::string>& fault) const;
  // Says the attempt failed, and records the restart or the error `decision` holds.
  void report_failure(Trial& trial, const ExitInfo& info, bool permanent, const std::string& why,
                      const AttemptDecision& decision);
  // The last lines of the rank whose failure ended the attempt (rank 0's own for a trial of
  // one process), as the failure report shows them.
  void report_failure_tail(const Trial& trial);
  bool declares_permanent(const ExitInfo& info) const;
  void handle_signal(int sig);
  // SIGKILLs every rank of every running trial (a second Ctrl-C, stop_grace_period passed);
  // their trials stay resumable from their latest checkpoint.
  void kill_running_trials();
  // Kills what still runs once stop_deadline_ has passed, saying which trials and why.
  void enforce_stop_deadline();
  void request_stop(Trial& trial, const char* reason);
  // searcher.time_metric: asks a trial whose validation reached its rung to checkpoint and
  // exit (engine/coordinator/coordinator_time_metric.cc).
  void stop_at_rung(Trial& trial, int64_t reached);
  void set_trial_state(Trial& trial, schema::TrialState state);
  void record_event(schema::EventType type, Json fields);
  // Hand an event to options_.notifier when notify.on asks for it (notifier.h,
  // engine/coordinator/coordinator_notify.cc). `error`: why the coordinator stopped early.
  // Each is staged into batch_, the commit that stores what it reports (notify_outbox.h).
  void notify_end(const std::string& state, const std::string& error = "");
  void notify_trial_error(const Trial& trial, const std::string& why);
  void notify_best(const Trial& trial, double value);
  // Every round, before the commit: a best_improved whose slot came is staged.
  void notify_due();
  // Gathers the live status line's facts and has terminal_ draw it, when a redraw is due
  // (engine/coordinator/coordinator_status.cc).
  void update_status();
  // The trial finished for good and leaves the live set: its share of the status line is
  // counted once, in status_tally_.
  void tally_finished(const Trial& trial);
  void reply(ControlConnection& conn, Json message);
  Status commit();
  bool finished() const;
  // Not finished, yet nothing runs and nothing is queued: no event can ever come.
  bool stalled() const;
  int finish();
  Trial* trial_by_index(int64_t index);
  // The running trial whose id ("7.3") is `id`, or null.
  Trial* running_trial_by_id(const std::string& id);
  // Adds a trial (created, or loaded on resume) to trials_, and to live_ unless finished.
  void add_trial(std::unique_ptr<Trial> trial);
  // Its record changed: commit() writes it this round.
  void mark_dirty(Trial& trial);
  // The trials not finished, in index order: what a round's loops visit.
  std::vector<Trial*> live_trials() const;
  std::string trial_id(int64_t index) const;
  int slots_free() const;

  StoreLayout store_;
  std::unique_ptr<ExperimentDb> db_;
  ObjectStore objects_;
  ExperimentConfig config_;
  // Determined's log_policies that cancel a failed trial's restarts (docs/determined.md).
  LogPolicyMatcher log_policies_{config_.log_policies};
  // Where trials run: a checkout of the experiment's code snapshot
  // (engine/coordinator/provenance.h).
  std::filesystem::path run_dir_;
  std::shared_ptr<const RunSource> run_source_;  // what run_dir_ holds, for peers
  Json experiment_;
  CoordinatorOptions options_;
  // Notifications and their markers in the store (engine/coordinator/notify_outbox.h).
  NotifyOutbox notify_outbox_{options_.notifier, &config_, db_.get()};
  Terminal terminal_;
  StatusBaseline status_baseline_;
  StatusTally status_tally_{config_.searcher.metric, config_.searcher.smaller_is_better};
  std::unique_ptr<Searcher> searcher_;
  std::unique_ptr<SignalPipe> signals_;
  std::optional<SlotPool> slots_;
  bool gpu_slots_ = false;              // slots are GPUs: trials get CUDA_VISIBLE_DEVICES
  std::vector<std::string> gpu_names_;  // what CUDA_VISIBLE_DEVICES calls them (gpu_names)
  // Where ranks run (launcher.h): this machine (0) and the agents (1…), as placed by slots_.
  std::unique_ptr<MachineLaunchers> launcher_;
  std::vector<MachineInfo> machines_;  // by machine index, as slots_ and launcher_ count them
  std::vector<std::string> machine_warnings_;  // agents not reached at the start, for start()
  std::set<int> machines_used_;      // machines that ran a rank of this run: they have its code
  std::set<int> machines_refusing_;  // machines that cannot run this experiment (refuses_run)
  // Lost agents being connected again (coordinator_machines.cc), by machine index.
  std::map<int, std::future<Result<std::unique_ptr<RemoteLauncher>>>> reconnecting_;
  std::map<int, Clock::time_point> reconnect_at_;
  std::optional<ControlListener> listener_;
  std::optional<OutputTail> output_;
  std::map<int, std::unique_ptr<ControlConnection>> connections_;
  std::map<int64_t, std::unique_ptr<Trial>> trials_;
  // The indices of the trials not yet finished: what every round visits, so that the work
  // per event stays independent of how many trials the search has ended (a search of 50,000
  // trials has a handful live). A trial's `finished` never goes back to false; commit()
  // drops finished trials from here after writing their records.
  std::set<int64_t> live_;
  // The trials whose record changed this round (mark_dirty), written by commit().
  std::set<int64_t> dirty_;
  StoreBatch batch_;
  bool batch_needs_sync_ = false;
  std::vector<std::pair<int, Json>> deferred_replies_;  // (connection fd, message)
  std::vector<std::string> staging_to_remove_;          // ingested, removed after the commit
  int64_t next_event_seq_ = 1;
  int64_t next_training_batch_seq_ = 1;
  int interrupts_ = 0;
  bool pausing_ = false;
  bool canceling_ = false;
  bool shutting_down_ = false;  // SIGTERM/SIGHUP: stop, but leave the experiment resumable by --all
  // When shutting down: the moment trials still running are killed (stop_grace_period).
  std::optional<Clock::time_point> stop_deadline_;
  // The searcher's state changed this round: its describe() is saved (schema::kSearcherState).
  bool searcher_changed_ = false;
  // This round's batch registers a checkpoint: trials are not started before it is
  // committed, since a start reads the latest checkpoint from the database.
  bool batch_has_checkpoint_ = false;
  // Size and mtime of .cairn/sdk/python/cairn.py when its content was last verified: a
  // trial start then costs a stat, not a read and compare of the file.
  struct FileStamp {
    int64_t size = -1;
    int64_t mtime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  FileStamp python_sdk_verified_;
  bool retention_due_ = false;          // a checkpoint arrived since retention last ran
  Clock::time_point next_retention_{};  // retention reads the whole store: not every round
  Status fatal_ = Status::Ok();
  // Last: its threads are joined before the store they write to goes.
  std::unique_ptr<CheckpointTransfers> transfers_;
};

}  // namespace cairn
