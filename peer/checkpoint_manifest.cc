#include "peer/checkpoint_manifest.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "common/file_util.h"
#include "common/sha256.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

// A JSON non-negative integer, whether parsed (unsigned) or built (signed).
bool is_count(const Json& j) {
  return j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
}

Status bad(const std::string& why) {
  return Status::BadInput("bad checkpoint manifest: " + why);
}

// A path as it may be quoted in one line: bounded, control characters replaced.
std::string shown(const std::string& path) {
  std::string out = path.substr(0, 120);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out + (path.size() > 120 ? "…" : "");
}

}  // namespace

bool is_sha256_hex(const std::string& digest) {
  return digest.size() == 64 && std::all_of(digest.begin(), digest.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Status check_manifest_path(const std::string& path) {
  if (path.empty()) return bad("an empty path");
  if (path.size() > kMaxManifestPathBytes)
    return bad("a path longer than " + std::to_string(kMaxManifestPathBytes) + " bytes");
  if (path.front() == '/') return bad("an absolute path '" + shown(path) + "'");
  if (path.find('\0') != std::string::npos) return bad("a path with a NUL byte");
  size_t depth = 0;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    const std::string part =
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty()) return bad("a path with an empty part '" + shown(path) + "'");
    if (part == "..") return bad("a path that climbs out with '..': '" + shown(path) + "'");
    if (part == ".") return bad("a path with a '.' part: '" + shown(path) + "'");
    if (part.size() > 255) return bad("a path part longer than 255 bytes");
    if (++depth > kMaxManifestPathDepth)
      return bad("a path deeper than " + std::to_string(kMaxManifestPathDepth) + " levels");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return Status::Ok();
}

Status check_trial_name(const std::string& trial) {
  if (trial.empty() || trial.size() > 64 || trial == "." || trial == "..")
    return Status::BadInput("bad trial id '" + shown(trial) + "'");
  for (char c : trial)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return Status::BadInput("bad trial id '" + shown(trial) + "'");
  return Status::Ok();
}

Json WireManifest::to_json() const {
  Json list = Json::array();
  for (const WireFile& f : files)
    list.push_back({{"path", f.path}, {"size", f.size}, {"mode", f.mode}, {"sha256", f.sha256}});
  return Json{{"files", std::move(list)}, {"bytes", bytes}};
}

Result<WireManifest> parse_wire_manifest(const Json& j) {
  if (!j.is_object()) return bad("not an object");
  auto files = j.find("files");
  if (files == j.end() || !files->is_array()) return bad("no files array");
  if (files->size() > kMaxManifestFiles)
    return bad("more than " + std::to_string(kMaxManifestFiles) + " files");
  WireManifest m;
  m.files.reserve(files->size());
  std::set<std::string> paths;
  for (const Json& f : *files) {
    if (!f.is_object() || f.size() != 4)
      return bad("an entry that is not {path, size, mode, sha256}");
    auto path = f.find("path");
    auto size = f.find("size");
    auto mode = f.find("mode");
    auto sha = f.find("sha256");
    if (path == f.end() || !path->is_string()) return bad("an entry without a path");
    WireFile file;
    file.path = path->get<std::string>();
    if (Status st = check_manifest_path(file.path); !st.ok()) return st;
    if (size == f.end() || !is_count(*size))
      return bad("'" + shown(file.path) + "' has no size (a non-negative integer)");
    file.size = size->get<uint64_t>();
    if (file.size > kMaxManifestFileBytes) return bad("'" + shown(file.path) + "' is over 1 TiB");
    if (mode == f.end() || !is_count(*mode) || mode->get<uint64_t>() > 0777)
      return bad("'" + shown(file.path) + "' has no mode (permission bits, at most 0777)");
    file.mode = static_cast<uint32_t>(mode->get<uint64_t>());
    if (sha == f.end() || !sha->is_string() || !is_sha256_hex(sha->get<std::string>()))
      return bad("'" + shown(file.path) + "' has no sha256 (64 lowercase hex digits)");
    file.sha256 = sha->get<std::string>();
    if (!paths.insert(file.path).second) return bad("'" + shown(file.path) + "' is listed twice");
    m.bytes += file.size;
    if (m.bytes > kMaxManifestTotalBytes) return bad("more than 4 TiB in all");
    m.files.push_back(std::move(file));
  }
  // A file may not also be another file's directory ("a" and "a/b"): the set is sorted, so
  // such a pair is adjacent once '/' sorts first; check every path's parents instead.
  for (const std::string& p : paths)
    for (size_t slash = p.find('/'); slash != std::string::npos; slash = p.find('/', slash + 1))
      if (paths.count(p.substr(0, slash)))
        return bad("'" + shown(p.substr(0, slash)) + "' is both a file and a directory");
  std::sort(m.files.begin(), m.files.end(),
            [](const WireFile& a, const WireFile& b) { return a.path < b.path; });
  return m;
}

UniqueFd open_beneath(const fs::path& dir, const std::string& rel) {
  UniqueFd base(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!base) return UniqueFd();
  open_how how{};
  how.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  const long fd = ::syscall(SYS_openat2, base.get(), rel.c_str(), &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) return UniqueFd(static_cast<int>(fd));
  return UniqueFd(::openat(base.get(), rel.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
}

namespace {

int64_t nanoseconds(const timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

FileIdentity identity_of(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size), nanoseconds(st.st_mtim), nanoseconds(st.st_ctim)};
}

Result<WireManifest> scan(const fs::path& dir, ScanCache* cache, ScanCounts* counts) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::BadInput(dir.string() + " is not a directory");
  WireManifest m;
  ScanCache learned;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(dir);
    if (it->is_symlink(ec))
      return Status::BadInput("checkpoint holds a symlink: " + rel.generic_string() +
                              " (only regular files travel)");
    if (it->is_directory(ec)) continue;
    if (!it->is_regular_file(ec))
      return Status::BadInput("checkpoint holds a special file: " + rel.generic_string());
    if (m.files.size() >= kMaxManifestFiles)
      return Status::BadInput("checkpoint has more than " + std::to_string(kMaxManifestFiles) +
                              " files");
    WireFile f;
    f.path = rel.generic_string();
    if (Status checked = check_manifest_path(f.path); !checked.ok()) return checked;
    // Not through links: a file or directory swapped for one since the walk saw it is not
    // followed out.
    UniqueFd fd = open_beneath(dir, f.path);
    struct stat fst {};
    if (!fd || ::fstat(fd.get(), &fst) != 0 || !S_ISREG(fst.st_mode))
      return Status::BadInput("checkpoint file changed while read: " + f.path);
    f.mode = fst.st_mode & 0777;
    const FileIdentity before = identity_of(fst);
    if (cache) {
      auto known = cache->files.find(f.path);
      if (known != cache->files.end() && known->second.identity == before) {
        f.size = before.size;
        f.sha256 = known->second.sha256;
        learned.files.emplace(f.path, known->second);
        if (counts) ++counts->reused;
        m.bytes += f.size;
        m.files.push_back(std::move(f));
        continue;
      }
    }
    timespec read_start{};
    ::clock_gettime(CLOCK_REALTIME, &read_start);
    auto digest = sha256_fd(fd.get(), f.path, &f.size);
    if (!digest.ok()) return digest.status();
    f.sha256 = *digest;
    if (counts) ++counts->hashed;
    // Kept for the next scan only when no write can have gone unseen (ScanCache).
    struct stat after {};
    if (cache && ::fstat(fd.get(), &after) == 0 && identity_of(after) == before &&
        f.size == before.size && scan_may_keep_digest(before.ctime_ns, nanoseconds(read_start)))
      learned.files.emplace(f.path, ScanCache::Entry{before, f.sha256});
    m.bytes += f.size;
    m.files.push_back(std::move(f));
  }
  if (ec) return Status::Io("cannot read " + dir.string() + ": " + ec.message());
  std::sort(m.files.begin(), m.files.end(),
            [](const WireFile& a, const WireFile& b) { return a.path < b.path; });
  if (cache) *cache = std::move(learned);
  return m;
}

}  // namespace

bool scan_may_keep_digest(int64_t ctime_ns, int64_t read_ns) {
  // A tick of the clock the kernel stamps files with, and 2 s more where the file system's
  // own grain may be coarser (its times end in whole milliseconds).
  timespec tick{};
  if (::clock_getres(CLOCK_REALTIME_COARSE, &tick) != 0) return false;
  int64_t margin = nanoseconds(tick);
  if (ctime_ns % 1000000 == 0) margin += int64_t{2} * 1000000000;
  return read_ns - ctime_ns > margin;
}

Result<WireManifest> scan_checkpoint_dir(const fs::path& dir) {
  return scan(dir, nullptr, nullptr);
}

Result<WireManifest> scan_checkpoint_dir(const fs::path& dir, ScanCache& cache,
                                         ScanCounts* counts) {
  return scan(dir, &cache, counts);
}

}  // namespace cairn
