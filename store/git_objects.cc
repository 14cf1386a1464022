#include "store/git_objects.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/file_util.h"
#include "common/sealed_text.h"
#include "store/git_handles.h"

namespace cairn::git {
namespace fs = std::filesystem;

namespace {

const char* mode_text(git_filemode_t mode) {
  switch (mode) {
    case GIT_FILEMODE_TREE:
      return "40000";
    case GIT_FILEMODE_BLOB_EXECUTABLE:
      return "100755";
    case GIT_FILEMODE_LINK:
      return "120000";
    case GIT_FILEMODE_COMMIT:
      return "160000";
    default:
      return "100644";
  }
}

// git's base_name_compare(): a tree's name compares as if followed by '/'.
bool git_order(const TreeEntry& a, const TreeEntry& b) {
  const size_t n = std::min(a.name.size(), b.name.size());
  const int c = std::memcmp(a.name.data(), b.name.data(), n);
  if (c != 0) return c < 0;
  auto next = [n](const TreeEntry& e) -> unsigned char {
    if (e.name.size() > n) return static_cast<unsigned char>(e.name[n]);
    return e.mode == GIT_FILEMODE_TREE ? '/' : '\0';
  };
  return next(a) < next(b);
}

// Inline, not git_oid_cmp(): sorting a snapshot's 10,000 ids calls it 100,000 times.
bool oid_less(const git_oid& a, const git_oid& b) {
  return std::memcmp(a.id, b.id, GIT_OID_RAWSZ) < 0;
}

bool oid_equal(const git_oid& a, const git_oid& b) {
  return std::memcmp(a.id, b.id, GIT_OID_RAWSZ) == 0;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

Result<std::string> read_content(const BlobSource& src) {
  std::string out;
  if (src.symlink) {
    out.resize(256);
    for (;;) {
      const ssize_t n = ::readlink(src.path.c_str(), out.data(), out.size());
      if (n < 0) return Status::Io("cannot read the link " + src.path + ": " + errno_text());
      if (static_cast<size_t>(n) < out.size()) {
        out.resize(static_cast<size_t>(n));
        return out;
      }
      out.resize(out.size() * 2);
    }
  }
  UniqueFd fd(::open(src.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0)
    return Status::Io("cannot read " + src.path + ": " + errno_text());
  // Read to the end whatever the size said: a file growing meanwhile is stored as read.
  out.resize(static_cast<size_t>(st.st_size) + 1);
  size_t len = 0;
  for (;;) {
    if (len == out.size()) out.resize(out.size() * 2);
    const ssize_t n = ::read(fd.get(), out.data() + len, out.size() - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io("cannot read " + src.path + ": " + errno_text());
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  out.resize(len);
  return out;
}

Status write_one(git_odb* odb, const BlobSource& src) {
  auto content = read_content(src);
  if (!content.ok()) return content.status();
  if (git_odb_write(src.out, odb, content->data(), content->size(), GIT_OBJECT_BLOB) != 0)
    return error("cannot store " + src.path);
  return Status::Ok();
}

}  // namespace

std::string serialize_tree(std::vector<TreeEntry>& entries) {
  std::sort(entries.begin(), entries.end(), git_order);
  std::string out;
  out.reserve(entries.size() * 40);
  for (const TreeEntry& e : entries) {
    out += mode_text(e.mode);
    out += ' ';
    out += e.name;
    out += '\0';
    out.append(reinterpret_cast<const char*>(e.oid.id), GIT_OID_RAWSZ);
  }
  return out;
}

namespace {

// The file system's own "now": the mtime it gives a file created in `dir` (removed at
// once). 0 when none can be created, which no directory's mtime is below.
int64_t fs_clock_ns(const fs::path& dir) {
  static std::atomic<uint64_t> serial{0};
  const fs::path probe =
      dir / (".cairn-clock-" + std::to_string(::getpid()) + "-" + std::to_string(serial++));
  UniqueFd fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return 0;
  struct stat st;
  const bool ok = ::fstat(fd.get(), &st) == 0;
  ::unlink(probe.c_str());
  return ok ? int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec : 0;
}

}  // namespace

bool StoredObjects::list(unsigned fan, std::vector<git_oid>& ids) {
  listings_.push_back(static_cast<uint8_t>(fan));
  char sub[3];
  std::snprintf(sub, sizeof sub, "%02x", fan);
  DIR* d = ::opendir((dir_ / sub).c_str());
  if (d == nullptr) return false;
  while (dirent* e = ::readdir(d)) {
    if (std::strlen(e->d_name) != 2 * GIT_OID_RAWSZ - 2) continue;
    git_oid id{};
    id.id[0] = static_cast<unsigned char>(fan);
    bool ok = true;
    for (size_t i = 1; i < GIT_OID_RAWSZ && ok; ++i) {
      const int hi = hex_value(e->d_name[2 * i - 2]), lo = hex_value(e->d_name[2 * i - 1]);
      ok = hi >= 0 && lo >= 0;
      id.id[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    if (ok) ids.push_back(id);
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end(),
            [](const git_oid& a, const git_oid& b) { return oid_less(a, b); });
  return true;
}

bool StoredObjects::stat_dir(unsigned fan, DirStat& out) const {
  char sub[3];
  std::snprintf(sub, sizeof sub, "%02x", fan);
  struct stat st;
  if (::stat((dir_ / sub).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  out = FileStat::of(st);
  return true;
}

StoredObjects::Fan& StoredObjects::fanout(const git_oid& oid) {
  Fan& f = fans_[oid.id[0]];
  if (!f.listed) {
    f.listed = true;
    // Sampled once, before the first listing: a directory last modified before it cannot
    // change during or after any listing without its mtime moving on.
    if (listing_clock_ns_ < 0) listing_clock_ns_ = fs_clock_ns(dir_);
    DirStat after;
    const bool before = stat_dir(oid.id[0], f.listed_stat);
    list(oid.id[0], f.loose);
    f.listing_settled = before && f.listed_stat.mtime_ns < listing_clock_ns_ &&
                        stat_dir(oid.id[0], after) && after == f.listed_stat;
  }
  return f;
}

bool StoredObjects::contains(const git_oid& oid) {
  Fan& f = fans_[oid.id[0]];
  if (std::binary_search(f.added.begin(), f.added.end(), oid, oid_less)) return true;
  if (!f.checked) {
    f.checked = true;
    DirStat now;
    f.vouched = f.recorded && stat_dir(oid.id[0], now) && now == f.recorded_stat;
  }
  if (f.vouched && std::binary_search(f.known.begin(), f.known.end(), oid, oid_less)) return true;
  const Fan& listed = fanout(oid);
  if (std::binary_search(listed.loose.begin(), listed.loose.end(), oid, oid_less)) return true;
  return git_odb_exists(odb_, &oid) != 0;
}

void StoredObjects::add(const git_oid& oid) {
  Fan& f = fans_[oid.id[0]];
  f.written = true;
  if (f.listed) f.written_since_listing = true;
  auto at = std::lower_bound(f.added.begin(), f.added.end(), oid, oid_less);
  if (at == f.added.end() || git_oid_cmp(&*at, &oid) != 0) f.added.insert(at, oid);
}

namespace {

// Version 2 is sealed (common/sealed_text.h): not fsynced, the record may come back from a
// crash damaged in the middle, and a damaged entry that still parses would vouch for an
// object that is absent. Version 1 files, sealed only by a bare "end" line, are not read.
constexpr std::string_view kKnownHeader = "cairn-known-objects 2\n";

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
bool get(std::string_view& in, T& v) {
  if (in.size() < sizeof v) return false;
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return true;
}

}  // namespace

void StoredObjects::load_known(const fs::path& file) {
  const Result<std::string> text = read_file(file);
  if (!text.ok()) return;
  // Cut short or damaged anywhere: not used at all, every directory is listed.
  const std::optional<std::string_view> body = unseal(*text);
  if (!body || body->substr(0, kKnownHeader.size()) != kKnownHeader) return;
  std::string_view in = body->substr(kKnownHeader.size());
  Fan parsed[256];
  while (!in.empty()) {
    uint8_t fan = 0;
    uint32_t count = 0;
    DirStat ds;
    if (!get(in, fan) || !get(in, ds.size) || !get(in, ds.ino) || !get(in, ds.mtime_ns) ||
        !get(in, ds.ctime_ns) || !get(in, ds.mode) || !get(in, count) ||
        in.size() < size_t{count} * GIT_OID_RAWSZ || parsed[fan].recorded)
      return;
    Fan& f = parsed[fan];
    f.recorded = true;
    f.recorded_stat = ds;
    f.known.resize(count);
    for (git_oid& id : f.known) {
      std::memcpy(id.id, in.data(), GIT_OID_RAWSZ);
      in.remove_prefix(GIT_OID_RAWSZ);
      if (id.id[0] != fan) return;
    }
    if (!std::is_sorted(f.known.begin(), f.known.end(), oid_less)) return;
  }
  for (unsigned i = 0; i < 256; ++i) {
    fans_[i].recorded = parsed[i].recorded;
    fans_[i].recorded_stat = parsed[i].recorded_stat;
    fans_[i].known = std::move(parsed[i].known);
  }
}

void StoredObjects::save_known(const fs::path& file, std::vector<git_oid> needed) {
  std::sort(needed.begin(), needed.end(),
            [](const git_oid& a, const git_oid& b) { return oid_less(a, b); });
  needed.erase(std::unique(needed.begin(), needed.end(),
                           [](const git_oid& a, const git_oid& b) { return oid_equal(a, b); }),
               needed.end());
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  static std::atomic<uint64_t> serial{0};
  fs::path tmp = file;
  tmp += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
  ::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) return;
  // A directory modified before the file system's "now" cannot be modified again without
  // its mtime moving on. Read where the directories are, as for the listings.
  const int64_t fs_now = fs_clock_ns(dir_);
  std::string out(kKnownHeader);
  std::vector<git_oid> present, listing;
  for (size_t b = 0; b < needed.size();) {
    const unsigned fan = needed[b].id[0];
    size_t e = b;
    while (e < needed.size() && needed[e].id[0] == fan) ++e;
    const Fan& f = fans_[fan];
    present.clear();
    DirStat ds;
    auto has = [](const std::vector<git_oid>& v, const git_oid& id) {
      return std::binary_search(v.begin(), v.end(), id, oid_less);
    };
    if (f.vouched && !f.written) {
      // As recorded all along, as far as this snapshot saw: whatever changed it meanwhile
      // changed its stat data too, so the next snapshot will not trust this record.
      ds = f.recorded_stat;
      for (size_t i = b; i < e; ++i)
        if (has(f.known, needed[i]) || (f.listed && has(f.loose, needed[i])))
          present.push_back(needed[i]);
    } else if (f.listed && f.listing_settled && !f.written_since_listing) {
      // Listed by contains() on the terms a listing here would meet, and not written to
      // since: listing it again would read the same (a change meanwhile moved its stat
      // data on, so the next snapshot will not trust this record).
      ds = f.listed_stat;
      for (size_t i = b; i < e; ++i)
        if (has(f.loose, needed[i])) present.push_back(needed[i]);
    } else {
      DirStat after;
      listing.clear();
      if (stat_dir(fan, ds) && ds.mtime_ns < fs_now && list(fan, listing) && stat_dir(fan, after) &&
          after == ds) {
        for (size_t i = b; i < e; ++i)
          if (has(listing, needed[i])) present.push_back(needed[i]);
      }
    }
    b = e;
    if (present.empty()) continue;
    put(out, static_cast<uint8_t>(fan));
    put(out, ds.size);
    put(out, ds.ino);
    put(out, ds.mtime_ns);
    put(out, ds.ctime_ns);
    put(out, ds.mode);
    put(out, static_cast<uint32_t>(present.size()));
    for (const git_oid& id : present)
      out.append(reinterpret_cast<const char*>(id.id), GIT_OID_RAWSZ);
  }
  seal(out);
  if (!write_all(fd.get(), out).ok() || ::rename(tmp.c_str(), file.c_str()) != 0)
    ::unlink(tmp.c_str());
}

Status write_blobs(git_odb* odb, const fs::path& objects_dir,
                   const std::vector<BlobSource>& sources, unsigned max_threads) {
  // Below a few files a thread and an odb of its own cost more than they save.
  const size_t threads = std::min<size_t>(std::max(1u, max_threads), sources.size() / 16 + 1);
  if (threads <= 1) {
    for (const BlobSource& src : sources) {
      Status st = write_one(odb, src);
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first_error = Status::Ok();
  auto fail = [&](Status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.ok()) first_error = std::move(st);
    failed = true;
  };
  auto work = [&] {
    git_odb* raw = nullptr;
    if (git_odb_open(&raw, objects_dir.c_str()) != 0)
      return fail(error("cannot open " + objects_dir.string()));
    Odb own(raw);
    while (!failed) {
      const size_t i = next++;
      if (i >= sources.size()) return;
      Status st = write_one(raw, sources[i]);
      if (!st.ok()) return fail(std::move(st));
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  return first_error;
}

}  // namespace cairn::git
