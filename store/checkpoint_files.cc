#include "store/checkpoint_files.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

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

namespace {

// Runs fn(0) … fn(n-1) on up to 4 threads (the calling one included) and returns the first
// failure, by index. Hashing is CPU-bound; more threads than cores only adds contention.
Status for_each_in_parallel(size_t n, const std::function<Status(size_t)>& fn) {
  const size_t threads =
      std::min<size_t>({n, 4, std::max(1u, std::thread::hardware_concurrency())});
  std::vector<Status> results(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) results[i] = fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const Status& st : results)
    if (!st.ok()) return st;
  return Status::Ok();
}

}  // namespace

Result<CheckpointManifest> ingest_checkpoint_dir(ObjectStore& objects, const fs::path& staging_dir,
                                                 const CheckpointOrigin& origin,
                                                 uint64_t* new_bytes, bool remove_staging) {
  CheckpointManifest manifest;
  manifest.origin = origin;
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(staging_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink())
      return Status::BadInput("checkpoint holds a symlink: " + it->path().string());
    if (it->is_directory()) continue;
    if (!it->is_regular_file())
      return Status::BadInput("checkpoint holds a special file: " + it->path().string());
    files.push_back(it->path());
  }
  if (ec)
    return Status::Io("cannot read checkpoint directory " + staging_dir.string() + ": " +
                      ec.message());
  std::sort(files.begin(), files.end());
  if (new_bytes) *new_bytes = 0;
  // Hashing every byte is most of a checkpoint's cost: the files are hashed in parallel.
  std::vector<std::string> hashes(files.size());
  std::vector<uint64_t> sizes(files.size());
  std::vector<char> added(files.size(), 0);
  Status st = for_each_in_parallel(files.size(), [&](size_t i) {
    bool is_new = false;
    auto hash = objects.adopt(files[i], &sizes[i], &is_new);
    if (!hash.ok()) return hash.status();
    hashes[i] = *hash;
    added[i] = is_new;
    return Status::Ok();
  });
  if (!st.ok()) return st;
  for (size_t i = 0; i < files.size(); ++i) {
    if (added[i] && new_bytes) *new_bytes += sizes[i];
    manifest.files.push_back(
        {files[i].lexically_relative(staging_dir).generic_string(), hashes[i], sizes[i]});
    manifest.bytes += sizes[i];
  }
  auto id = objects.put_bytes(manifest.to_json().dump());
  if (!id.ok()) return id.status();
  manifest.id = *id;
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
    if (rel.is_absolute() || rel.lexically_normal().string().starts_with(".."))
      return Status::Corrupt("checkpoint " + manifest.id.substr(0, 12) + ": bad path " + f.path);
    fs::create_directories((dest / rel).parent_path(), ec);  // before the parallel copies
  }
  // Verifying every byte's hash is most of a restore's cost: files are copied in parallel.
  Status st = for_each_in_parallel(manifest.files.size(), [&](size_t i) {
    const auto& f = manifest.files[i];
    Status copied = objects.copy_out(f.sha256, dest / f.path);
    if (copied.kind() == ErrorKind::kCorrupt)
      return Status::Corrupt("checkpoint " + manifest.id.substr(0, 12) + ": file " + f.path +
                             " is corrupt or missing");
    return copied;
  });
  if (!st.ok()) return st;
  cleanup.release();
  return Status::Ok();
}

}  // namespace cairn
