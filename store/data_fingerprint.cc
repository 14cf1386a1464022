#include "store/data_fingerprint.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/file_util.h"
#include "common/sha256.h"
#include "store/object_store.h"
#include "store/stat_cache.h"

namespace cairn {
namespace fs = std::filesystem;

struct FileHasher::Impl {
  fs::path cache_file;
  StatCache cache;
  bool changed = false;
};

FileHasher::FileHasher(const StoreLayout& store) : impl_(std::make_unique<Impl>()) {
  impl_->cache_file = store.root() / "cache" / "hashes";
  impl_->cache = StatCache::load(impl_->cache_file);
}

FileHasher::~FileHasher() {
  // Shared by every experiment and by dependency hashes: entries of other users are kept.
  if (impl_->changed) (void)impl_->cache.save(impl_->cache_file, true);
}

Result<std::string> FileHasher::hash(const fs::path& file, uint64_t* size) {
  struct stat st;
  if (::stat(file.c_str(), &st) != 0)
    return Status::Io("cannot read " + file.string() + ": " + errno_text());
  const FileStat fst = FileStat::of(st);
  if (size) *size = fst.size;
  const std::string key = fs::absolute(file).lexically_normal().string();
  if (auto cached = impl_->cache.lookup(key, fst)) return *cached;
  impl_->changed = true;
  ++computed_;
  auto hash = sha256_file(file);
  if (!hash.ok()) return hash.status();
  impl_->cache.record(key, fst, *hash);
  return hash;
}

namespace {

// Regular files under `root` (a file or a directory), following symbolic links to files and
// directories but never into a directory already visited (a link loop).
Status list_files(const fs::path& root, const std::string& label,
                  std::vector<std::pair<std::string, fs::path>>& out) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    out.emplace_back(label, root);
    return Status::Ok();
  }
  std::set<std::pair<dev_t, ino_t>> seen;
  std::vector<std::pair<fs::path, std::string>> pending{{root, label}};
  while (!pending.empty()) {
    auto [dir, rel] = pending.back();
    pending.pop_back();
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second) continue;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      // The entry's type comes from readdir: no stat here, except to follow a symbolic link
      // (FileHasher::hash() stats each file once, for its cache).
      std::error_code type_ec;
      const fs::path& p = it->path();
      if (it->is_directory(type_ec))
        pending.emplace_back(p, rel + "/" + p.filename().string());
      else if (it->is_regular_file(type_ec))
        out.emplace_back(rel + "/" + p.filename().string(), p);
    }
    if (ec) return Status::Io("cannot read " + dir.string() + ": " + ec.message());
  }
  return Status::Ok();
}

std::string digest_of(const std::vector<DataFile>& files) {
  Sha256 h;
  for (const DataFile& f : files) {
    h.update(f.path.data(), f.path.size());
    h.update("\0", 1);
    h.update(f.sha256.data(), f.sha256.size());
    h.update("\n", 1);
  }
  return h.hex_digest();
}

}  // namespace

namespace {

// The files under the `data:` paths as (label, path on disk), sorted by label, and their
// fingerprint; nothing kept. An entry that does not exist is bad input, or contributes no
// files when `skip_missing`.
Result<DataFingerprint> hash_listed(const StoreLayout& store, const fs::path& workdir,
                                    const std::vector<std::string>& data_paths, bool skip_missing,
                                    std::vector<std::pair<std::string, fs::path>>& listed) {
  for (const std::string& entry : data_paths) {
    std::string label = fs::path(entry).lexically_normal().generic_string();
    while (label.size() > 1 && label.back() == '/') label.pop_back();
    const fs::path abs = fs::path(entry).is_absolute() ? fs::path(entry) : workdir / entry;
    std::error_code ec;
    if (!fs::exists(abs, ec)) {
      if (skip_missing) continue;
      return Status::BadInput("data: " + entry + " does not exist");
    }
    // Listed where the data really is (one realpath per entry), so the stat cache, keyed by
    // path, knows it whichever way it is reached: from the project, or through the links of
    // a run directory or a reproduce checkout.
    const fs::path real = fs::canonical(abs, ec);
    Status st = list_files(ec ? abs : real, label, listed);
    if (!st.ok()) return st;
  }
  // One file per label: two entries may reach the same file (`data` and `data/a.bin`), now
  // by different real paths when one of them is a link; counted twice it would inflate the
  // size that decides whether the data is kept, and change the digest.
  std::sort(listed.begin(), listed.end());
  listed.erase(std::unique(listed.begin(), listed.end(),
                           [](const auto& a, const auto& b) { return a.first == b.first; }),
               listed.end());

  DataFingerprint fp;
  FileHasher hasher(store);
  for (const auto& [label, path] : listed) {
    DataFile f{label, "", 0};
    auto hash = hasher.hash(path, &f.size);
    if (!hash.ok()) return hash.status();
    f.sha256 = *hash;
    fp.bytes += f.size;
    fp.files.push_back(std::move(f));
  }
  fp.digest = digest_of(fp.files);
  return fp;
}

}  // namespace

Result<DataFingerprint> hash_data(const StoreLayout& store, const fs::path& workdir,
                                  const std::vector<std::string>& data_paths) {
  std::vector<std::pair<std::string, fs::path>> listed;
  return hash_listed(store, workdir, data_paths, true, listed);
}

Result<DataFingerprint> fingerprint_data(const StoreLayout& store, const fs::path& workdir,
                                         const std::vector<std::string>& data_paths,
                                         uint64_t store_limit) {
  std::vector<std::pair<std::string, fs::path>> listed;
  auto hashed = hash_listed(store, workdir, data_paths, false, listed);
  if (!hashed.ok()) return hashed.status();
  DataFingerprint fp = std::move(*hashed);
  fp.stored = fp.bytes <= store_limit;
  if (fp.stored) {
    ObjectStore objects(store.objects());
    for (size_t i = 0; i < fp.files.size(); ++i) {
      DataFile& f = fp.files[i];
      if (objects.contains(f.sha256)) continue;  // unchanged data costs nothing to keep
      uint64_t size = 0;
      auto stored = objects.copy_in(listed[i].second, &size, nullptr);
      if (!stored.ok()) return stored.status();
      if (*stored != f.sha256)  // changed between hashing and copying: keep what was copied
        f.sha256 = *stored, f.size = size;
    }
    fp.digest = digest_of(fp.files);
  }
  return fp;
}

DataChanges compare_data(const DataFingerprint& recorded, const DataFingerprint& now) {
  // By path, not by position: a record read back is not trusted to be sorted.
  std::map<std::string, const DataFile*> current;
  for (const DataFile& f : now.files) current.emplace(f.path, &f);
  std::set<std::string> seen;
  DataChanges out;
  for (const DataFile& f : recorded.files) {
    if (!seen.insert(f.path).second) continue;
    auto it = current.find(f.path);
    if (it == current.end())
      out.removed.push_back(f.path);
    else if (it->second->sha256 != f.sha256)
      out.changed.push_back(f.path);
  }
  for (const auto& [path, file] : current)
    if (!seen.count(path)) out.added.push_back(path);
  std::sort(out.changed.begin(), out.changed.end());
  std::sort(out.removed.begin(), out.removed.end());
  return out;
}

Status restore_data(const StoreLayout& store, const DataFingerprint& fp, const fs::path& dest) {
  ObjectStore objects(store.objects());
  for (const DataFile& f : fp.files) {
    // Read where it is: absolute, or outside the workdir (a record must never make a
    // restore write outside `dest`).
    if (!stays_below(f.path)) continue;
    const fs::path target = dest / f.path;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    fs::remove(target, ec);
    Status st = objects.copy_out(f.sha256, target);
    if (!st.ok())
      return Status(st.kind() == ErrorKind::kCorrupt
                        ? Status::Corrupt("data " + f.path + ": " + st.message())
                        : st);
  }
  return Status::Ok();
}

Json to_json(const DataFingerprint& fp) {
  Json files = Json::array();
  for (const DataFile& f : fp.files)
    files.push_back({{"path", f.path}, {"sha256", f.sha256}, {"size", f.size}});
  return Json{{"files", files}, {"bytes", fp.bytes}, {"stored", fp.stored}, {"digest", fp.digest}};
}

Result<DataFingerprint> data_fingerprint_from_json(const Json& j) {
  DataFingerprint fp;
  if (j.is_null()) return fp;
  if (!j.is_object())
    return Status::Corrupt("the data fingerprint record is damaged: not an object");
  try {
    for (const Json& f : j.value("files", Json::array()))
      fp.files.push_back({f.at("path").get<std::string>(), f.at("sha256").get<std::string>(),
                          f.value("size", uint64_t{0})});
    fp.bytes = j.value("bytes", uint64_t{0});
    fp.stored = j.value("stored", false);
    fp.digest = j.value("digest", "");
  } catch (const Json::exception& e) {
    return Status::Corrupt(std::string("the data fingerprint record is damaged: ") + e.what());
  }
  // The digest is computed from the list when the record is made; a list that no longer
  // gives it was altered or cut since, and its hashes cannot be trusted.
  if (!fp.digest.empty() && fp.digest != digest_of(fp.files))
    return Status::Corrupt(
        "the data fingerprint record is inconsistent: its digest does not "
        "match its list of files");
  return fp;
}

}  // namespace cairn
