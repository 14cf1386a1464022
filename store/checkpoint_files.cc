#include "store/checkpoint_files.h"

#include <algorithm>

#include "common/file_util.h"

namespace cairn {
namespace fs = std::filesystem;

Json CheckpointManifest::to_json() const {
  Json files_json = Json::array();
  for (const auto& f : files)
    files_json.push_back({{"path", f.path}, {"sha256", f.sha256}, {"size", f.size}});
  return Json{{"format", 1}, {"trial", origin.trial}, {"step", origin.step}, {"files", files_json}};
}

Result<CheckpointManifest> CheckpointManifest::from_json(const Json& j, std::string id) {
  CheckpointManifest m;
  m.id = std::move(id);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array())
    return Status::Corrupt("checkpoint " + m.id.substr(0, 12) + ": malformed manifest");
  // Manifests written before the origin was recorded have none.
  if (j.contains("trial") && j["trial"].is_string()) m.origin.trial = j["trial"].get<std::string>();
  if (j.contains("step") && j["step"].is_number_integer()) m.origin.step = j["step"].get<int64_t>();
  for (const auto& f : j["files"]) {
    if (!f.is_object() || !f.contains("path") || !f.contains("sha256") || !f.contains("size"))
      return Status::Corrupt("checkpoint " + m.id.substr(0, 12) + ": malformed manifest entry");
    CheckpointFile file{f["path"].get<std::string>(), f["sha256"].get<std::string>(),
                        f["size"].get<uint64_t>()};
    m.bytes += file.size;
    m.files.push_back(std::move(file));
  }
  return m;
}

Result<std::vector<fs::path>> checkpoint_files_below(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink())
      return Status::BadInput("checkpoint holds a symlink: " + it->path().string());
    if (it->is_directory()) continue;
    if (!it->is_regular_file())
      return Status::BadInput("checkpoint holds a special file: " + it->path().string());
    files.push_back(it->path());
  }
  if (ec)
    return Status::Io("cannot read checkpoint directory " + dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

Result<CheckpointManifest> ingest_checkpoint_dir(ObjectStore& objects, const fs::path& staging_dir,
                                                 const CheckpointOrigin& origin,
                                                 uint64_t* new_bytes, bool remove_staging) {
  CheckpointManifest manifest;
  manifest.origin = origin;
  auto listed = checkpoint_files_below(staging_dir);
  if (!listed.ok()) return listed.status();
  std::vector<fs::path> files = std::move(*listed);
  if (new_bytes) *new_bytes = 0;
  // The manifest is stored in the same batch as the files it names (one round of syncs, not
  // two); nothing of the batch gets its name before all of it is durable.
  auto make_manifest = [&](const std::vector<AdoptedObject>& adopted) {
    for (size_t i = 0; i < files.size(); ++i) {
      const AdoptedObject& object = adopted[i];
      manifest.files.push_back(
          {files[i].lexically_relative(staging_dir).generic_string(), object.hash, object.size});
      manifest.bytes += object.size;
    }
    return manifest.to_json().dump();
  };
  std::string id;
  auto adopted = objects.adopt_all(files, make_manifest, &id);
  if (!adopted.ok()) return adopted.status();
  for (const AdoptedObject& object : *adopted)
    if (object.added && new_bytes) *new_bytes += object.size;
  manifest.id = id;
  std::error_code ec;
  if (remove_staging) fs::remove_all(staging_dir, ec);
  return manifest;
}

Result<CheckpointManifest> load_manifest(const ObjectStore& objects, const std::string& id) {
  auto bytes = objects.read(id);
  if (!bytes.ok()) {
    if (bytes.status().kind() == ErrorKind::kNotFound)
      return Status::Corrupt("checkpoint " + id.substr(0, 12) + ": manifest is missing");
    return bytes.status();
  }
  Json j = Json::parse(*bytes, nullptr, false);
  if (j.is_discarded())
    return Status::Corrupt("checkpoint " + id.substr(0, 12) + ": manifest is not JSON");
  return CheckpointManifest::from_json(j, id);
}

Status materialize_checkpoint(const ObjectStore& objects, const CheckpointManifest& manifest,
                              const fs::path& dest) {
  ScopedDirRemover cleanup(dest);
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) return Status::Io("cannot create " + dest.string() + ": " + ec.message());
  for (const auto& f : manifest.files) {
    fs::path rel(f.path);
    if (!stays_below(rel))
      return Status::Corrupt("checkpoint " + manifest.id.substr(0, 12) + ": bad path " + f.path);
    fs::create_directories((dest / rel).parent_path(), ec);  // before the parallel copies
  }
  // Every file's hash is verified before this returns (a corrupt checkpoint is never handed
  // to a trial); copy_out_all copies and verifies in parallel.
  std::vector<ObjectCopy> copies;
  copies.reserve(manifest.files.size());
  for (const auto& f : manifest.files) copies.push_back({f.sha256, f.size, dest / f.path});
  std::vector<Status> results = objects.copy_out_all(copies);
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].kind() == ErrorKind::kCorrupt)
      return Status::Corrupt("checkpoint " + manifest.id.substr(0, 12) + ": file " +
                             manifest.files[i].path + " is corrupt or missing");
  }
  for (const Status& st : results)
    if (!st.ok()) return st;
  cleanup.release();
  return Status::Ok();
}

}  // namespace cairn
