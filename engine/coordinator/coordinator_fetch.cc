// `checkpoint_fetch`: a trial asks for any stored checkpoint by the names
// store/checkpoint_lookup.h resolves (a content id or prefix, TRIAL@latest|best, a
// Determined storage id), of this experiment or of any other in the store — Determined's
// `restore_path(storage_id)` and `download()` of a checkpoint other than the trial's own
// (docs/determined.md, docs/protocol.md). cairn writes a copy of it, verified against its
// hashes, into a fresh directory below the trial's work directory and answers its path.
// The copy is written on a transfer thread (checkpoint_transfers.h), never on the loop: a
// checkpoint of gigabytes holds up no other trial. For a rank on an agent that copy then
// travels to the agent (only the content the agent's cache lacks) and the answer names the
// agent's directory.
//
// The copy is the requester's to read (and to change: the store's objects are never
// exposed); a later fetch of the same checkpoint writes another.
#include "common/file_util.h"
#include "engine/coordinator/checkpoint_transfers.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/trial_state.h"
#include "store/checkpoint_files.h"
#include "store/checkpoint_lookup.h"

namespace cairn {
namespace fs = std::filesystem;

void Coordinator::handle_checkpoint_fetch(Trial& trial, ControlConnection& conn, const Json& msg) {
  const Json seq = msg.value("seq", Json(0));
  auto refuse = [&](const std::string& why) {
    reply(conn, Json{{"type", "error"}, {"re", seq}, {"message", why}});
  };
  const Json ref = msg.value("ref", Json());
  if (!ref.is_string() || ref.get<std::string>().empty())
    return refuse("checkpoint_fetch needs \"ref\": a checkpoint id, TRIAL@latest, or a storage id");
  auto found = find_checkpoint(store_, ref.get<std::string>());
  if (!found.ok()) return refuse(found.status().message());
  const Json& record = found->record;
  const std::string id = record["id"].get<std::string>();
  auto manifest = load_manifest(objects_, id);
  if (!manifest.ok())
    return refuse("checkpoint " + id.substr(0, 12) + ": " + manifest.status().message());

  // The rank that asks gets the answer: the copy is written (and, for a rank on an agent,
  // sent there) on a transfer thread, and the answer goes only to that rank's connection.
  const Rank* rank = conn.rank >= 0 && static_cast<size_t>(conn.rank) < trial.ranks.size()
                         ? &trial.ranks[static_cast<size_t>(conn.rank)]
                         : nullptr;
  if (!rank || !rank->process) return refuse("checkpoint_fetch before this rank's hello");
  const fs::path parent =
      store_.trial_work(experiment_["id"].get<int64_t>(), trial.index) / "fetched";
  std::error_code ec;
  fs::create_directories(parent, ec);
  auto dir = make_unique_dir(parent, id.substr(0, 12) + "-");
  if (!dir.ok()) return refuse(dir.status().message());
  // materialize_checkpoint creates the directory itself.
  fs::remove(*dir, ec);

  if (!transfers_) transfers_ = std::make_unique<CheckpointTransfers>(objects_, store_.staging());
  CheckpointJob job = transfer_job(CheckpointJob::Kind::kPush, trial);
  if (const AgentEndpoint* agent = launcher_->agent_of(*rank->process)) {
    job.agent = *agent;
    job.to_agent = true;
  }
  job.rank = conn.rank;
  job.chief = rank->process->pid;
  job.connection = conn.fd();
  job.seq = seq;
  job.path = dir->string();
  job.manifest = std::move(*manifest);
  job.metadata = Json{{"type", "checkpoint_fetched"},
                      {"re", seq},
                      {"path", dir->string()},
                      {"checkpoint", id},
                      {"experiment", found->experiment},
                      {"trial", record.value("trial", Json())},
                      {"steps_completed", record.value("steps_completed", Json(0))},
                      {"metadata", record.value("metadata", Json::object())}};
  transfers_->start(std::move(job));
}

void Coordinator::finish_checkpoint_push(const CheckpointJobResult& done) {
  const CheckpointJob& job = done.job;
  std::error_code ec;
  // A copy for an agent has travelled, or never will; a local one is the rank's, unless it
  // can no longer be answered.
  if (job.to_agent) fs::remove_all(job.path, ec);
  Trial* trial = trial_by_index(job.trial_index);
  // Only to the rank that asked, while it is still connected: once it is gone, its
  // descriptor may be another connection's.
  const Rank* rank = trial && trial->attempt() == job.attempt && job.rank >= 0 &&
                             static_cast<size_t>(job.rank) < trial->ranks.size()
                         ? &trial->ranks[static_cast<size_t>(job.rank)]
                         : nullptr;
  if (!rank || !rank->process || rank->process->pid != job.chief ||
      rank->connection_fd != job.connection) {
    fs::remove_all(job.path, ec);
    return;
  }
  if (!done.status.ok()) {
    reply_to(job.connection,
             Json{{"type", "error"}, {"re", job.seq}, {"message", done.status.message()}});
    fs::remove_all(job.path, ec);
    return;
  }
  Json answer = job.metadata;
  if (job.to_agent) answer["path"] = done.staged_path;
  reply_to(job.connection, std::move(answer));
}

}  // namespace cairn
