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

bool oid_less(const git_oid& a, const git_oid& b) {
  return git_oid_cmp(&a, &b) < 0;
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

std::vector<git_oid>& StoredObjects::fanout(const git_oid& oid) {
  const unsigned fan = oid.id[0];
  std::vector<git_oid>& ids = loose_[fan];
  if (listed_[fan]) return ids;
  listed_[fan] = true;
  char sub[3];
  std::snprintf(sub, sizeof sub, "%02x", fan);
  if (DIR* d = ::opendir((dir_ / sub).c_str())) {
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
  }
  std::sort(ids.begin(), ids.end(), oid_less);
  return ids;
}

bool StoredObjects::contains(const git_oid& oid) {
  const std::vector<git_oid>& ids = fanout(oid);
  if (std::binary_search(ids.begin(), ids.end(), oid, oid_less)) return true;
  return git_odb_exists(odb_, &oid) != 0;
}

void StoredObjects::add(const git_oid& oid) {
  std::vector<git_oid>& ids = fanout(oid);
  auto at = std::lower_bound(ids.begin(), ids.end(), oid, oid_less);
  if (at == ids.end() || git_oid_cmp(&*at, &oid) != 0) ids.insert(at, oid);
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
