// A data-parallel trial's checkpoint round over machines (docs/peers.md "A checkpoint round
// over machines"), on a transfer thread: every agent's part is fetched at once (its manifest
// plus the content this store lacks, made durable before the agent may drop its copy), this
// machine's part is adopted into the store, and the union of the parts (checkpoint_parts.h)
// is stored as the checkpoint's manifest last, so a manifest never names content that could
// be lost. A part that fails fails the whole: no manifest is stored, and the loop registers
// nothing (the content that did arrive stays unreferenced, for `cairn gc`).
#include <algorithm>
#include <thread>

#include "common/file_util.h"
#include "engine/coordinator/checkpoint_parts.h"
#include "engine/coordinator/checkpoint_transfers.h"
#include "peer/checkpoint_retry.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

struct PartResult {
  Status status;
  CheckpointPart part;
  uint64_t new_bytes = 0;
  uint64_t content_bytes = 0;
};

PartResult adopt_local(ObjectStore& objects, const fs::path& dir) {
  PartResult out;
  out.part.machine = "local";
  auto files = checkpoint_files_below(dir);
  if (!files.ok()) {
    out.status = files.status();
    return out;
  }
  auto adopted = objects.adopt_all(*files);
  if (!adopted.ok()) {
    out.status = adopted.status();
    return out;
  }
  for (size_t i = 0; i < files->size(); ++i) {
    const AdoptedObject& o = (*adopted)[i];
    out.part.files.push_back(
        {(*files)[i].lexically_relative(dir).generic_string(), o.hash, o.size});
    if (o.added) out.new_bytes += o.size;
  }
  return out;
}

PartResult fetch_part(ObjectStore& objects, const fs::path& staging, const CheckpointJob& job,
                      const CheckpointJob::Part& from) {
  PartResult out;
  out.part.machine = from.machine;
  std::error_code ec;
  fs::create_directories(staging, ec);
  auto into = make_unique_dir(staging, job.trial + "-part-");
  if (!into.ok()) {
    out.status = into.status();
    return out;
  }
  ScopedDirRemover cleanup(*into);  // received files are hard-linked into the store
  auto keep = [&](const FetchedCheckpoint& fetched) -> Status {
    std::vector<fs::path> files;
    std::vector<std::string> verified;  // receive_content checked each against its digest
    for (const FetchedContent& c : fetched.received) {
      files.push_back(c.file);
      verified.push_back(c.sha256);
    }
    auto adopted = objects.adopt_all(files, {}, nullptr, &verified);
    if (!adopted.ok()) return adopted.status();
    for (const AdoptedObject& o : *adopted)
      if (o.added) out.new_bytes += o.size;
    for (const WireFile& f : fetched.manifest.files) {
      // A file this side had when it answered: still there once the part is ours.
      if (!objects.contains(f.sha256))
        return Status::Failed("object " + f.sha256.substr(0, 12) + " left the store mid-transfer");
      out.part.files.push_back({f.path, f.sha256, f.size});
    }
    return Status::Ok();
  };
  auto fetched = fetch_checkpoint_retrying(
      from.agent, job.trial, job.attempt, from.path,
      [&](const std::string& digest) { return !objects.contains(digest); }, *into, keep);
  if (!fetched.ok())
    out.status = fetched.status();
  else
    out.content_bytes = fetched->content_bytes;
  return out;
}

}  // namespace

CheckpointJobResult CheckpointTransfers::run_round(const CheckpointJob& job) {
  CheckpointJobResult result;
  result.job = job;
  std::vector<PartResult> parts(job.parts.size() + 1);
  {
    // Every agent's part at once (each on its own connection); this machine's meanwhile.
    std::vector<std::thread> fetching;
    for (size_t i = 0; i < job.parts.size(); ++i)
      fetching.emplace_back(
          [&, i] { parts[i + 1] = fetch_part(objects_, staging_, job, job.parts[i]); });
    parts[0] = adopt_local(objects_, job.local_dir);
    for (std::thread& t : fetching) t.join();
  }
  std::vector<CheckpointPart> merged_parts;
  for (const PartResult& p : parts) {
    if (!p.status.ok()) {
      result.status = Status::Failed("the part written on " + p.part.machine +
                                     " did not arrive: " + p.status.message());
      return result;
    }
    merged_parts.push_back(p.part);
    result.new_bytes += p.new_bytes;
    result.content_bytes += p.content_bytes;
  }
  auto files = merge_checkpoint_parts(merged_parts);
  if (!files.ok()) {
    result.status = files.status();
    return result;
  }
  CheckpointManifest manifest;
  manifest.origin = {job.trial, job.step};
  manifest.files = std::move(*files);
  for (const CheckpointFile& f : manifest.files) manifest.bytes += f.size;
  // Last, once every part's content is durable here: the manifest that names them.
  auto id = objects_.put_bytes(manifest.to_json().dump());
  if (!id.ok()) {
    result.status = id.status();
    return result;
  }
  manifest.id = *id;
  result.manifest = std::move(manifest);
  return result;
}

}  // namespace cairn
