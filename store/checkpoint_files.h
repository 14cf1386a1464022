// A checkpoint as files: a directory the trial wrote, turned into objects plus a manifest
// (itself an object; its hash is the checkpoint's id), and back into a directory on restore.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "store/object_store.h"

namespace cairn {

struct CheckpointFile {
  std::string path;  // relative, '/'-separated
  std::string sha256;
  uint64_t size = 0;
};

// Which trial took a checkpoint and after how many steps. It is part of the manifest, so two
// checkpoints with identical files (a trial whose weights stopped changing, two trials that
// saved the same bytes) still get distinct ids and records; their files are stored once.
struct CheckpointOrigin {
  std::string trial;
  int64_t step = 0;
};

struct CheckpointManifest {
  std::string id;  // sha256 of the manifest's canonical JSON
  CheckpointOrigin origin;
  std::vector<CheckpointFile> files;
  uint64_t bytes = 0;
  Json to_json() const;
  static Result<CheckpointManifest> from_json(const Json& j, std::string id);
};

// The regular files below `dir`, sorted: what a checkpoint directory holds. A symlink or a
// special file is refused (kBadInput, naming it); an unreadable directory is kIo.
Result<std::vector<std::filesystem::path>> checkpoint_files_below(const std::filesystem::path& dir);

// Links every regular file under `staging_dir` into the object store, fsynced, then stores
// the manifest and (with `remove_staging`) removes the staging directory. Symlinks and
// special files are refused. `new_bytes` (optional) receives the bytes that were not already
// in the store. A caller that registers the checkpoint later passes remove_staging = false
// and removes the directory once the registration is durable.
Result<CheckpointManifest> ingest_checkpoint_dir(ObjectStore& objects,
                                                 const std::filesystem::path& staging_dir,
                                                 const CheckpointOrigin& origin,
                                                 uint64_t* new_bytes = nullptr,
                                                 bool remove_staging = true);

Result<CheckpointManifest> load_manifest(const ObjectStore& objects, const std::string& id);

// Writes the checkpoint's files under `dest` (created), verifying every hash. A corrupt or
// missing object gives kCorrupt and leaves `dest` removed.
Status materialize_checkpoint(const ObjectStore& objects, const CheckpointManifest& manifest,
                              const std::filesystem::path& dest);

}  // namespace cairn
