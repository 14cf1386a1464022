#include "engine/coordinator/checkpoint_transfers.h"

#include <signal.h>
#include <unistd.h>

#include "common/file_util.h"
#include "peer/checkpoint_retry.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

// How long staging a directory on the agent may take (a connection and one request).
constexpr auto kStageTime = std::chrono::seconds(10);

}  // namespace

CheckpointTransfers::~CheckpointTransfers() {
  for (Worker& w : workers_)
    if (w.thread.joinable()) w.thread.join();
}

void CheckpointTransfers::start(CheckpointJob job) {
  // Threads that ended are joined here, so the list stays as long as the jobs in flight.
  {
    std::lock_guard lock(mutex_);
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->finished) {
        it->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
  }
  ++in_flight_[job.trial_index];
  Worker& worker = workers_.emplace_back();
  worker.thread = std::thread([this, &worker, job = std::move(job)] {
    CheckpointJobResult result = run(job);
    {
      std::lock_guard lock(mutex_);
      done_.push_back(std::move(result));
      worker.finished = true;
    }
    ::kill(::getpid(), SIGCHLD);  // wakes the coordinator's loop
  });
}

std::vector<CheckpointJobResult> CheckpointTransfers::take() {
  std::lock_guard lock(mutex_);
  std::vector<CheckpointJobResult> out;
  out.swap(done_);
  for (const CheckpointJobResult& r : out) --in_flight_[r.job.trial_index];
  return out;
}

CheckpointJobResult CheckpointTransfers::run(const CheckpointJob& job) {
  if (job.kind == CheckpointJob::Kind::kRound) return run_round(job);
  CheckpointJobResult result;
  result.job = job;
  if (job.kind == CheckpointJob::Kind::kStage) {
    auto path = stage_checkpoint_retrying(job.agent, job.trial, job.attempt, kStageTime);
    if (path.ok())
      result.staged_path = *path;
    else
      result.status = path.status();
    return result;
  }
  if (job.kind == CheckpointJob::Kind::kPush) {
    // materialize_checkpoint creates the directory and removes it on failure. The messages
    // are the answer the rank gets.
    if (Status st = materialize_checkpoint(objects_, job.manifest, job.path); !st.ok()) {
      result.status =
          Status::Failed("checkpoint " + job.manifest.id.substr(0, 12) + ": " + st.message());
      return result;
    }
    if (!job.to_agent) return result;
    auto pushed = push_checkpoint_retrying(job.agent, job.trial, job.attempt, job.path, kStageTime);
    if (pushed.ok())
      result.staged_path = pushed->path;
    else
      result.status = Status::Failed("cannot send the checkpoint to this machine: " +
                                     pushed.status().message());
    return result;
  }
  std::error_code ec;
  fs::create_directories(staging_, ec);
  auto into = make_unique_dir(staging_, job.trial + "-fetch-");
  if (!into.ok()) {
    result.status = into.status();
    return result;
  }
  // The received files are hard-linked into the store; this directory goes either way.
  ScopedDirRemover cleanup(*into);
  auto keep = [&](const FetchedCheckpoint& fetched) -> Status {
    CheckpointManifest manifest;
    manifest.origin = {job.trial, job.step};
    for (const WireFile& f : fetched.manifest.files) {
      manifest.files.push_back({f.path, f.sha256, f.size});
      manifest.bytes += f.size;
    }
    std::vector<fs::path> files;
    std::vector<std::string> verified;  // receive_content checked each against its digest
    for (const FetchedContent& c : fetched.received) {
      files.push_back(c.file);
      verified.push_back(c.sha256);
    }
    std::string id;
    auto adopted = objects_.adopt_all(
        files, [&](const std::vector<AdoptedObject>&) { return manifest.to_json().dump(); }, &id,
        &verified);
    if (!adopted.ok()) return adopted.status();
    for (const AdoptedObject& object : *adopted)
      if (object.added) result.new_bytes += object.size;
    // A file this side had when it answered: still there now that the checkpoint names it.
    for (const CheckpointFile& f : manifest.files)
      if (!objects_.contains(f.sha256))
        return Status::Failed("object " + f.sha256.substr(0, 12) + " left the store mid-transfer");
    manifest.id = id;
    result.manifest = std::move(manifest);
    return Status::Ok();
  };
  auto fetched = fetch_checkpoint_retrying(
      job.agent, job.trial, job.attempt, job.path,
      [&](const std::string& digest) { return !objects_.contains(digest); }, *into, keep);
  if (!fetched.ok()) {
    result.status = fetched.status();
    return result;
  }
  result.content_bytes = fetched->content_bytes;
  return result;
}

}  // namespace cairn
