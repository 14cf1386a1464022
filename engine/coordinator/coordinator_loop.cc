// The coordinator's event loop: poll, dispatch, commit, answer.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "common/metric_order.h"
#include "common/number_text.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/trial_state.h"
#include "store/best_trial.h"
#include "store/garbage_collector.h"
#include "store/retention.h"
#include "store/schema.h"
#include "store/stored_records.h"

namespace cairn {

void Coordinator::accept_connections() {
  for (UniqueFd& fd : listener_->accept_all()) {
    int raw = fd.get();
    connections_[raw] = std::make_unique<ControlConnection>(std::move(fd));
  }
}

void Coordinator::read_connection(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  ControlConnection& conn = *it->second;
  const bool open = conn.read_available();
  for (const std::string& line : conn.take_lines()) handle_line(conn, line);
  for (int n = conn.take_overlong_lines(); n > 0; --n)
    reply(conn, Json{{"type", "error"},
                     {"message", "message longer than " +
                                     std::to_string(ControlConnection::kMaxLineBytes >> 20) +
                                     " MiB: dropped (docs/protocol.md)"}});
  if (!open) {
    if (Trial* trial = trial_by_index(conn.trial)) {
      const bool chief = trial->chief().connection_fd == fd;
      if (chief) trial->pending_operation_seq.reset();
      // Forgotten, or a later connection given this fd number would pass for the rank's
      // (handle_hello refuses a second connection for a rank).
      for (Rank& r : trial->ranks)
        if (r.connection_fd == fd) r.connection_fd = -1;
      // Rank 0 gone: the others' requests waiting for its are decided without it.
      if (chief) {
        trial->chief().left = true;
        answer_deferred_operations(*trial);
      }
      // Its pending request will never be answered: the rank waits in nothing of cairn's.
      if (conn.rank >= 0 && conn.rank < trial->world_size()) {
        RankWait& wait = trial->ranks[static_cast<size_t>(conn.rank)].wait;
        if (wait.call != RankCall::kExited) wait.call = RankCall::kOutside;
      }
    }
    // Replies still queued for it have nowhere to go.
    std::erase_if(deferred_replies_, [fd](const auto& r) { return r.first == fd; });
    connections_.erase(it);
  }
}

void Coordinator::poll_once() {
  std::vector<pollfd> fds;
  fds.push_back({signals_->fd(), POLLIN, 0});
  fds.push_back({listener_->fd(), POLLIN, 0});
  for (auto& [fd, conn] : connections_)
    fds.push_back({fd, static_cast<short>(POLLIN | (conn->wants_write() ? POLLOUT : 0)), 0});
  fds.push_back({output_->fd(), POLLIN, 0});

  int timeout_ms = config_.liveness_timeout > 0 ? 250 : 1000;
  const auto now = Clock::now();
  for (const Trial* trial : live_trials()) {
    if (trial->orphan_process || trial->remote_orphan_wait)
      timeout_ms = std::min(timeout_ms, 100);  // no SIGCHLD for those
    if (trial->finished || trial->running() || trial->not_before <= now) continue;
    auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(trial->not_before - now).count();
    timeout_ms = std::min<int>(timeout_ms, static_cast<int>(wait) + 1);
  }
  if (stop_deadline_) {
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(*stop_deadline_ - now).count();
    timeout_ms = std::min<int>(timeout_ms, static_cast<int>(std::max<int64_t>(wait, 0)) + 1);
  }
  int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n < 0 && errno != EINTR) {
    fatal_ = Status::Io("poll: " + errno_text());
    return;
  }
  for (const pollfd& p : fds) {
    if (!p.revents) continue;
    if (p.fd == fds[0].fd) {
      char sigs[64];
      ssize_t got;
      while ((got = ::read(p.fd, sigs, sizeof sigs)) > 0)
        for (ssize_t i = 0; i < got; ++i) handle_signal(sigs[i]);
    } else if (p.fd == listener_->fd()) {
      accept_connections();
    } else if (p.fd == output_->fd()) {
      for (int64_t key : output_->changed()) drain_output_key(key);
    } else if (connections_.count(p.fd)) {
      if (p.revents & POLLOUT) connections_[p.fd]->flush();
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) read_connection(p.fd);
    }
  }
  // A SIGCHLD can be coalesced with another; reaping on every round costs one syscall.
  follow_new_outputs();
  collect_exits();
  finish_checkpoint_transfers();
  watch_machines();
  check_liveness();
  enforce_stop_deadline();
  check_rank_waits();
}

bool Coordinator::finished() const {
  const std::vector<Trial*> live = live_trials();
  for (const Trial* trial : live)
    if (trial->running()) return false;
  if (canceling_) return true;
  for (const Trial* trial : live)
    if ((trial->orphan_process || trial->remote_orphan_wait) && !pausing_) return false;
  if (pausing_) return true;
  return searcher_->finished();
}

bool Coordinator::stalled() const {
  // Called every round: a held slot (a trial runs) answers at once, without the walk below.
  if (pausing_ || searcher_->finished() || slots_->free() < slots_->size()) return false;
  for (const Trial* trial : live_trials()) {
    if (trial->running() || trial->orphan_process || trial->remote_orphan_wait) return false;
    // Queued (perhaps in a restart back-off): schedule() starts it when a slot is free.
    if (!trial->finished && !trial->closed && trial->target > trial->validated_target) return false;
  }
  // Nothing runs and nothing will: only a running trial's report or exit makes the searcher
  // decide anything, so it would wait for ever.
  return true;
}

int Coordinator::finish() {
  using schema::ExperimentState;
  stop_remote_orphan_waits();
  ExperimentEnd end{canceling_, pausing_, shutting_down_, searcher_->finished()};
  int completed = 0;
  for (const auto& [index, trial] : trials_) {
    ++end.trials;
    if (trial->state == schema::TrialState::kError) ++end.errored;
    if (trial->state == schema::TrialState::kCompleted) ++completed;
  }
  const ExperimentState ended = decide_experiment_end(end);
  const std::string state = schema::experiment_state_name(ended);
  const int total = end.trials;
  experiment_["state"] = state;
  experiment_.erase("driver");
  if (ended != ExperimentState::kPaused && ended != ExperimentState::kActive)
    experiment_["ended_at"] = Json(std::time(nullptr));
  std::vector<const Json*> records;
  for (const auto& [index, trial] : trials_) records.push_back(&trial->record);
  const std::string& metric = config_.searcher.metric;
  const Json* best = best_trial(records, metric, MetricOrder(config_.searcher.smaller_is_better));
  if (best) experiment_["best_trial"] = best->value("id", "");
  batch_.put_json(schema::kExperiment, experiment_);
  record_event(schema::EventType::kExperimentState, {{"state", state}});
  notify_end(state);  // in the commit that stores the end: no kill can lose one of the two
  Status st = commit();
  if (!st.ok()) {
    terminal_.warn("error: " + st.message());
    return 1;
  }
  if (retention_due_) apply_retention();
  const std::string id = std::to_string(experiment_["id"].get<int64_t>());
  if (ended == ExperimentState::kActive) {
    terminal_.note("experiment " + id + " interrupted; `cairn resume " + id +
                   "` (or `cairn resume --all`) continues it");
    return 0;
  }
  if (ended == ExperimentState::kPaused) {
    terminal_.note("experiment " + id + " paused; continue it with: cairn resume " + id);
    return 0;
  }
  if (ended == ExperimentState::kCanceled) {
    terminal_.note("experiment " + id + " canceled");
    return 0;
  }
  std::string summary = "experiment " + id + " " + state + ": " + std::to_string(completed) +
                        " of " + std::to_string(total) + " trials completed";
  if (best)
    summary += "; best trial " + best->value("id", "") + " (" + metric + " " +
               format_number((*best)["best_validation"][metric].get<double>()) + ")";
  terminal_.note(summary);
  return ended == ExperimentState::kError ? 1 : 0;
}

// Applies checkpoint.keep_* (store/retention.h) to this experiment's checkpoints; runs after
// a commit, so every registered checkpoint and trial state it reads is durable.
void Coordinator::apply_retention() {
  retention_due_ = false;
  next_retention_ = Clock::now() + std::chrono::seconds(10);
  auto doomed = checkpoints_to_delete(*db_);
  if (!doomed.ok()) {
    terminal_.warn("warning: checkpoint retention skipped: " + doomed.status().message());
    return;
  }
  if (doomed->empty()) return;
  const int64_t id = experiment_["id"].get<int64_t>();
  DeleteOptions options;
  options.fresh_grace = ingest_grace(store_, id);
  auto result = delete_checkpoints(*db_, objects_, store_, id, *doomed, options);
  if (!result.ok()) terminal_.warn("warning: checkpoint retention: " + result.status().message());
}

int Coordinator::run() {
  signals_ = std::make_unique<SignalPipe>();
  Status st = start();
  if (!st.ok()) {
    terminal_.warn("error: " + st.message());
    return st.exit_code();
  }
  while (!finished()) {
    schedule();
    if (!fatal_.ok() || finished()) break;
    poll_once();
    if (!fatal_.ok()) break;
    // Start what this round freed slots for before committing, so one trial's end and the
    // next one's start share one fsync (and the start's record is durable before the trial
    // can say hello). Not when this round registered a checkpoint: a start restores the
    // latest checkpoint from the database, which has it only after the commit.
    if (!batch_has_checkpoint_) schedule();
    notify_due();
    Status committed = commit();
    if (!committed.ok()) {
      fatal_ = committed;
      break;
    }
    if (!fatal_.ok()) break;  // a trial could not start for the store's sake (schedule())
    if (retention_due_ && Clock::now() >= next_retention_) apply_retention();
    update_status();
    if (stalled()) {
      // A searcher that expects work no trial will do (a store changed behind cairn's back,
      // or a bug): an error that says so, not a coordinator idle for ever.
      const Json view = searcher_->describe();
      fatal_ = Status::Failed(
          "the search cannot go on: no trial is running or queued, but the searcher is not "
          "finished" +
          (view.empty() ? std::string() : " (" + view.dump() + ")") +
          "; the experiment stays ACTIVE");
      break;
    }
  }
  terminal_.end_status();
  if (!fatal_.ok()) {
    terminal_.warn("error: " + fatal_.message());
    for (Trial* trial : live_trials())
      if (trial->running()) request_stop(*trial, "shutdown");
    notify_end("ACTIVE", fatal_.message());
    return 1;
  }
  return finish();
}

}  // namespace cairn
