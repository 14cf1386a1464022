// Checkpoints of a trial whose rank runs on an agent (docs/peers.md "Checkpoints over the
// wire"): the checkpoint directory is staged on the agent, and what the trial writes there
// reaches the object store as its manifest plus the content the store lacks, on a transfer
// thread (checkpoint_transfers.h). The checkpoint is registered, and the trial acknowledged,
// only once every file is durable here, and only while the attempt that wrote it is still
// the trial's current one.
#include "engine/coordinator/checkpoint_transfers.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/one_answer_hook.h"
#include "engine/coordinator/trial_state.h"

namespace cairn {

namespace {

// A transfer for the trial's chief, answering request `msg` on `conn` when it ends.
CheckpointJob job_for(CheckpointJob job, const AgentEndpoint& agent, const Trial& trial,
                      const ControlConnection& conn, const Json& msg) {
  job.agent = agent;
  job.chief = trial.chief().process->pid;
  job.connection = conn.fd();
  job.seq = msg.value("seq", Json(0));
  return job;
}

}  // namespace

CheckpointJob Coordinator::transfer_job(CheckpointJob::Kind kind, const Trial& trial) const {
  CheckpointJob job;
  job.kind = kind;
  job.trial_index = trial.index;
  job.trial = trial_id(trial.index);
  job.attempt = trial.attempt();
  return job;
}

const AgentEndpoint* Coordinator::remote_chief(const Trial& trial, int rank) const {
  // A data-parallel trial's checkpoint is a round (coordinator_ranks.cc), whose parts on
  // agents travel as coordinator_remote_rounds.cc says.
  if (trial.world_size() != 1 || rank != 0) return nullptr;
  const Rank& chief = trial.ranks.front();
  return chief.process ? launcher_->agent_of(*chief.process) : nullptr;
}

bool Coordinator::remote_checkpoint_begin(Trial& trial, ControlConnection& conn, const Json& msg) {
  const AgentEndpoint* agent = remote_chief(trial, conn.rank);
  if (!agent) return false;
  if (!transfers_) transfers_ = std::make_unique<CheckpointTransfers>(objects_, store_.staging());
  transfers_->start(
      job_for(transfer_job(CheckpointJob::Kind::kStage, trial), *agent, trial, conn, msg));
  return true;
}

bool Coordinator::remote_checkpoint_end(Trial& trial, ControlConnection& conn, const Json& msg) {
  const AgentEndpoint* agent = remote_chief(trial, conn.rank);
  if (!agent || (!transfers_ && !adopted_attempt(trial))) return false;
  if (!transfers_) transfers_ = std::make_unique<CheckpointTransfers>(objects_, store_.staging());
  const std::string path = msg.value("path", "");
  std::set<std::string>& staged = transfers_->staged()[trial.index];
  // Not handed out here, or no step: the local path answers that with its error. An attempt
  // this coordinator adopted may end a checkpoint the dead one staged: the agent, which
  // staged it, checks that the path is that trial's and attempt's (else the fetch fails and
  // the trial is answered an error; coordinator_adoption.cc).
  if ((!staged.count(path) && !adopted_attempt(trial)) || !msg.contains("step") ||
      !msg["step"].is_number_integer())
    return false;
  if (!staged.erase(path) && trial.latest_checkpoint_step == msg["step"].get<int64_t>() &&
      trial.record.value("latest_checkpoint", Json()).is_string()) {
    // The killed coordinator registered it and died before its ack reached the rank (an
    // attempt checkpoints each step once; the agent has dropped the directory): registered
    // once, acknowledged now.
    reply(conn, Json{{"type", "ack"},
                     {"re", msg.value("seq", Json(0))},
                     {"checkpoint", trial.record["latest_checkpoint"]}});
    return true;
  }
  CheckpointJob job =
      job_for(transfer_job(CheckpointJob::Kind::kFetch, trial), *agent, trial, conn, msg);
  job.path = path;
  job.step = msg["step"].get<int64_t>();
  job.metadata = msg.value("metadata", Json::object());
  transfers_->start(std::move(job));
  return true;
}

bool Coordinator::remote_checkpoint_abort(Trial& trial, const Json& msg) {
  if (!transfers_) return false;
  // The directory is the agent's: nothing here to remove.
  return transfers_->staged()[trial.index].erase(msg.value("path", "")) > 0;
}

void Coordinator::finish_checkpoint_transfers() {
  if (!transfers_) return;
  // A rank waiting for its checkpoint to travel is not silent: liveness_timeout does not
  // count the transfer (a local checkpoint's ingestion holds the loop, so it never did).
  if (config_.liveness_timeout > 0)
    for (Trial* trial : live_trials())
      if (transfers_->busy(trial->index)) trial->last_heard = Clock::now();
  // Nor does rank_wait_timeout: the ranks of a round whose parts travel wait on the wire.
  for (Trial* trial : live_trials())
    if (transfers_->busy(trial->index))
      for (Rank& rank : trial->ranks)
        if (rank.wait.waits_on_gang()) rank.wait.since = Clock::now();
  for (CheckpointJobResult& done : transfers_->take()) {
    const CheckpointJob& job = done.job;
    if (job.kind == CheckpointJob::Kind::kPush) {
      finish_checkpoint_push(done);
      continue;
    }
    if (job.round_part || job.kind == CheckpointJob::Kind::kRound) {
      finish_round_transfer(done);
      continue;
    }
    Trial* trial = trial_by_index(job.trial_index);
    // Only the attempt that asked may have its checkpoint. A checkpoint its attempt
    // completed (checkpoint_end) before it ended — its machine lost, its rank killed — is
    // registered: the trial's next attempt waits for it (schedule(), busy()). One of an
    // attempt that is no longer the trial's latest is refused, never registered.
    const bool latest = trial && trial->attempt() == job.attempt;
    const bool current = latest && trial->chief().process &&
                         trial->chief().process->pid == job.chief &&
                         trial->chief().connection_fd == job.connection;
    if (job.kind == CheckpointJob::Kind::kStage) {
      if (!current) continue;  // its rank is gone; the agent's empty directory stays
      if (!done.status.ok()) {
        reply_to(job.connection,
                 Json{{"type", "error"}, {"re", job.seq}, {"message", done.status.message()}});
        continue;
      }
      transfers_->staged()[job.trial_index].insert(done.staged_path);
      reply_to(job.connection,
               Json{{"type", "checkpoint_dir"}, {"re", job.seq}, {"path", done.staged_path}});
      continue;
    }
    if (!trial) continue;
    Status status = done.status;
    if (status.ok() && !latest)
      status = Status::Failed("attempt " + std::to_string(job.attempt) + " of trial " + job.trial +
                              " is no longer the trial's latest attempt");
    if (!status.ok()) {
      log_output(*trial, "cairn: error: checkpoint at step " + std::to_string(job.step) +
                             " was not saved: " + status.message() + "\n");
      record_event(schema::EventType::kCheckpointFailed,
                   {{"trial", trial->index}, {"step", job.step}, {"error", status.message()}});
      if (current)
        reply_to(job.connection,
                 Json{{"type", "error"}, {"re", job.seq}, {"message", status.message()}});
      continue;
    }
    // Tests only: fetched (the agent has removed its copy), not registered (one_answer_hook.h).
    if (stop_after_one_answer_if_testing("checkpoint_fetched", job.step)) continue;
    register_checkpoint(*trial, done.manifest, job.step, done.new_bytes, job.metadata);
    // Tests only: registered, and its one rank not told (one_answer_hook.h).
    if (stop_after_one_answer_if_testing("checkpoint_ack", job.step)) continue;
    // Deferred until the batch that registers it is committed (reply_to). Only to the rank
    // that asked: once it is gone, its descriptor may be another connection's.
    if (current)
      reply_to(job.connection,
               Json{{"type", "ack"}, {"re", job.seq}, {"checkpoint", done.manifest.id}});
  }
}

}  // namespace cairn
