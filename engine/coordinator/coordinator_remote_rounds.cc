// A data-parallel trial's checkpoint round whose ranks run on several machines (docs/peers.md
// "A checkpoint round over machines"). A one-machine round hands every rank one staging
// directory of this machine (coordinator_ranks.cc); here each agent that holds ranks of the
// trial stages a directory of its own, on its own disk, for its ranks of the round, and the
// ranks of this machine keep the local one. The round settles as a local one does (every rank
// has ended its part or is not part of it); then, instead of ingesting one directory, a round
// job (checkpoint_round_job.cc) brings every agent's part here — its manifest plus only the
// content the store lacks — adopts this machine's part, and stores the union as one manifest.
// The checkpoint is registered, and the ranks acknowledged, only when every part is durable
// here; a part that fails leaves no checkpoint, and every rank of the round is told why.
#include <filesystem>
#include <set>

#include "engine/coordinator/checkpoint_transfers.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/one_answer_hook.h"
#include "engine/coordinator/trial_state.h"

namespace cairn {
namespace fs = std::filesystem;

bool Coordinator::remote_round_begin(Trial& trial, RankRound& round, int64_t step,
                                     ControlConnection& conn, const Json& msg) {
  if (conn.rank < 0 || conn.rank >= trial.world_size()) return false;
  const Rank& rank = trial.ranks[static_cast<size_t>(conn.rank)];
  const AgentEndpoint* agent = rank.process ? launcher_->agent_of(*rank.process) : nullptr;
  if (!agent) return false;  // a rank of this machine: the round's local directory
  RemoteRoundPart& part = round.remote[rank.machine];
  const Json seq = msg.value("seq", Json(0));
  if (!part.failure.empty()) {
    // Refused, as a local directory that cannot be made is: the rank takes no part.
    reply(conn, Json{{"type", "error"}, {"re", seq}, {"message", part.failure}});
    return true;
  }
  round.begun.insert(conn.rank);
  if (!part.path.empty()) {
    reply(conn, Json{{"type", "checkpoint_dir"}, {"re", seq}, {"path", part.path}});
    return true;
  }
  part.waiting.push_back({conn.fd(), seq, conn.rank});
  if (part.staging) return true;  // the machine's first rank asked already
  part.agent = *agent;
  part.machine = machines_[static_cast<size_t>(rank.machine)].name();
  part.staging = true;
  if (!transfers_) transfers_ = std::make_unique<CheckpointTransfers>(objects_, store_.staging());
  CheckpointJob job = transfer_job(CheckpointJob::Kind::kStage, trial);
  job.agent = *agent;
  job.step = step;
  job.round_part = true;
  job.machine = rank.machine;
  transfers_->start(std::move(job));
  return true;
}

const std::string& Coordinator::round_dir_of(const Trial& trial, const RankRound& round,
                                             int rank) const {
  if (rank >= 0 && rank < trial.world_size())
    if (auto it = round.remote.find(trial.ranks[static_cast<size_t>(rank)].machine);
        it != round.remote.end()) {
      auto own = it->second.rank_paths.find(rank);  // named by a killed coordinator
      return own != it->second.rank_paths.end() ? own->second : it->second.path;
    }
  return round.staging_dir;
}

bool Coordinator::start_remote_round(Trial& trial, int64_t step, RankRound& done,
                                     std::string* failure) {
  if (done.remote.empty()) return false;
  for (const auto& [machine, part] : done.remote)
    if (!part.failure.empty()) {
      *failure = "its part on " + part.machine + " could not be staged: " + part.failure;
      return false;
    }
  CheckpointJob job = transfer_job(CheckpointJob::Kind::kRound, trial);
  job.step = step;
  job.metadata = done.metadata;
  job.local_dir = done.staging_dir;
  // A part still being staged has no directory yet: its rank began and exited before it got
  // one, so nothing was written there (as a rank that exits in a local round adds nothing).
  for (const auto& [machine, part] : done.remote) {
    std::set<std::string> paths;
    if (!part.path.empty()) paths.insert(part.path);
    for (const auto& [rank, path] : part.rank_paths) paths.insert(path);
    for (const std::string& path : paths) job.parts.push_back({part.machine, part.agent, path});
  }
  for (const RoundWaiter& w : done.waiting) job.waiters.push_back({w.fd, w.seq, w.rank});
  // A round rebuilt on adoption may have staged nothing here (coordinator_replayed_answers.cc).
  if (!transfers_) transfers_ = std::make_unique<CheckpointTransfers>(objects_, store_.staging());
  transfers_->start(std::move(job));
  return true;
}

void Coordinator::finish_round_transfer(CheckpointJobResult& done) {
  const CheckpointJob& job = done.job;
  Trial* trial = trial_by_index(job.trial_index);
  const bool latest = trial && trial->attempt() == job.attempt;
  // A connection of this trial's rank, not a descriptor another connection reuses now.
  auto still_ours = [&](int fd, std::optional<int> rank) {
    auto it = connections_.find(fd);
    return latest && it != connections_.end() && it->second->trial == job.trial_index &&
           (!rank || it->second->rank == *rank);
  };
  if (job.kind == CheckpointJob::Kind::kStage) {
    if (!latest) return;  // its round went with its attempt; the agent's empty directory stays
    auto round = trial->checkpoint_rounds.find(job.step);
    if (round == trial->checkpoint_rounds.end()) return;
    auto part = round->second.remote.find(job.machine);
    if (part == round->second.remote.end()) return;
    part->second.staging = false;
    if (done.status.ok())
      part->second.path = done.staged_path;
    else
      part->second.failure = done.status.message();
    // Tests only (one_answer_hook.h): another part's rank already had the one answer.
    const bool held = holding_answers_if_testing("checkpoint_dir", job.step);
    const bool hold =
        !held && done.status.ok() && stop_after_one_answer_if_testing("checkpoint_dir", job.step);
    for (const RemoteRoundPart::Waiter& w : part->second.waiting) {
      if (held) break;
      // Refused, the rank takes no part (its SDK warns and trains on), and the round fails
      // once it settles: the machine's part is missing.
      if (!done.status.ok()) round->second.begun.erase(w.rank);
      if (!still_ours(w.fd, w.rank)) continue;
      reply_to(w.fd,
               done.status.ok()
                   ? Json{{"type", "checkpoint_dir"}, {"re", w.seq}, {"path", done.staged_path}}
                   : Json{{"type", "error"}, {"re", w.seq}, {"message", done.status.message()}});
      if (hold) break;  // the test kills cairn before the others get theirs
    }
    part->second.waiting.clear();
    if (!done.status.ok()) settle_checkpoint_rounds(*trial);
    return;
  }
  std::error_code ec;
  if (!trial) {
    fs::remove_all(job.local_dir, ec);
    return;
  }
  Status status = done.status;
  if (status.ok() && !latest)
    status = Status::Failed("attempt " + std::to_string(job.attempt) + " of trial " + job.trial +
                            " is no longer the trial's latest attempt");
  if (!status.ok()) {
    fs::remove_all(job.local_dir, ec);
    log_output(*trial, "cairn: error: checkpoint at step " + std::to_string(job.step) +
                           " was not saved: " + status.message() + "\n");
    record_event(schema::EventType::kCheckpointFailed,
                 {{"trial", trial->index}, {"step", job.step}, {"error", status.message()}});
    for (const CheckpointJob::Waiter& w : job.waiters)
      if (still_ours(w.fd, w.rank))
        reply_to(w.fd, Json{{"type", "error"}, {"re", w.seq}, {"message", status.message()}});
    return;
  }
  // Tests only: fetched (the agents have removed their copies), not registered
  // (one_answer_hook.h).
  if (stop_after_one_answer_if_testing("checkpoint_fetched", job.step)) return;
  staging_to_remove_.push_back(job.local_dir);  // once the record is durable
  register_checkpoint(*trial, done.manifest, job.step, done.new_bytes, job.metadata);
  // Deferred until the batch that registers it is committed (reply_to).
  const bool hold = stop_after_one_answer_if_testing("checkpoint_ack", job.step);
  for (const CheckpointJob::Waiter& w : job.waiters)
    if (still_ours(w.fd, w.rank)) {
      reply_to(w.fd, Json{{"type", "ack"}, {"re", w.seq}, {"checkpoint", done.manifest.id}});
      if (hold) break;  // the test kills cairn before the others get theirs
    }
}

}  // namespace cairn
