#include "store/object_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "common/parallel.h"
#include "common/sha256.h"

namespace cairn {
namespace fs = std::filesystem;

fs::path ObjectStore::path_of(const std::string& hash) const {
  return dir_ / hash.substr(0, 2) / hash.substr(2);
}

bool ObjectStore::contains(const std::string& hash) const {
  std::error_code ec;
  return fs::exists(path_of(hash), ec);
}

Status ObjectStore::install(const fs::path& tmp, const std::string& hash, bool* added) {
  const fs::path dest = path_of(hash);
  std::error_code ec;
  if (fs::exists(dest, ec)) {
    fs::remove(tmp, ec);
    // A collector spares objects changed recently (store/garbage_collector.h): this one is
    // about to be named by a checkpoint whose record is not committed yet.
    ::utimensat(AT_FDCWD, dest.c_str(), nullptr, 0);
    if (added) *added = false;
    return Status::Ok();
  }
  fs::create_directories(dest.parent_path(), ec);
  if (ec) return Status::Io("cannot create " + dest.parent_path().string() + ": " + ec.message());
  {
    UniqueFd fd(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd || ::fsync(fd.get()) != 0)
      return Status::Io("fsync " + tmp.string() + ": " + errno_text());
  }
  ::chmod(tmp.c_str(), 0444);
  if (::rename(tmp.c_str(), dest.c_str()) != 0)
    return Status::Io("cannot move " + tmp.string() + " into the object store: " + errno_text());
  if (added) *added = true;
  return fsync_dir(dest.parent_path());
}

fs::path ObjectStore::temp_name(const std::string& tag) const {
  // Unique per call: two threads (or processes) may store the same content at once.
  static std::atomic<uint64_t> counter{0};
  return dir_ / ("tmp-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

Result<std::string> ObjectStore::adopt(const fs::path& file, uint64_t* size, bool* added) {
  auto adopted = adopt_all({file});
  if (!adopted.ok()) return adopted.status();
  if (size) *size = (*adopted)[0].size;
  if (added) *added = (*adopted)[0].added;
  return (*adopted)[0].hash;
}

namespace {

// With this many new objects or more, one syncfs(2) of the store's file system is cheaper
// than an fsync per object: each fsync of a new file is a journal commit of its own, and
// thousands of them cost seconds. Below it, the per-file fsyncs (run in parallel, so the
// journal batches them) avoid waiting for unrelated dirty data on the same file system.
constexpr size_t kSyncfsFrom = 16;

// Copies `in` to `out` and returns the SHA-256 of what was copied: the loop behind every
// copy into or out of the store, which hashes as it goes rather than reading twice.
Result<std::string> copy_hashing(int in, const fs::path& in_name, int out, const fs::path& out_name,
                                 uint64_t* bytes = nullptr) {
  Sha256 h;
  uint64_t total = 0;
  char* buf = thread_io_buffer();
  for (;;) {
    ssize_t n = ::read(in, buf, kIoBufferSize);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io("cannot read " + in_name.string() + ": " + errno_text());
    if (n == 0) break;
    h.update(buf, static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
    Status st = write_all(out, std::string_view(buf, static_cast<size_t>(n)));
    if (!st.ok()) return Status::Io("cannot write " + out_name.string() + ": " + st.message());
  }
  if (bytes) *bytes = total;
  return h.hex_digest();
}

// Removes the temporary links of a batch that failed.
class TempFiles {
 public:
  explicit TempFiles(size_t n) : paths_(n) {}
  ~TempFiles() {
    std::error_code ec;
    for (const fs::path& p : paths_)
      if (!p.empty()) fs::remove(p, ec);
  }
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;
  fs::path& operator[](size_t i) { return paths_[i]; }

 private:
  std::vector<fs::path> paths_;
};

// Starts the kernel writing `files` out (sync_file_range(WRITE)), one after another, on a
// thread of its own, while other threads hash them. stop() ends it after the current file:
// once hashing is done, the fsyncs write whatever it has not reached, and files whose
// content was stored already (about to be deleted) need no write-back at all.
class WriteBack {
 public:
  explicit WriteBack(const std::vector<fs::path>& files)
      : thread_([this, &files] {
          for (const fs::path& file : files) {
            if (stop_.load(std::memory_order_relaxed)) return;
            UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
            if (fd) ::sync_file_range(fd.get(), 0, 0, SYNC_FILE_RANGE_WRITE);
          }
        }) {}
  ~WriteBack() { stop(); }
  WriteBack(const WriteBack&) = delete;
  WriteBack& operator=(const WriteBack&) = delete;
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};  // before thread_: it must exist when the thread starts
  std::thread thread_;
};

}  // namespace

Result<std::vector<AdoptedObject>> ObjectStore::adopt_all(
    const std::vector<fs::path>& files, const Trailer& trailer, std::string* trailer_hash,
    const std::vector<std::string>* verified) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return Status::Io("cannot create " + dir_.string() + ": " + ec.message());
  // Opened first: syncfs reports the write-back errors that happen after its descriptor
  // was opened.
  UniqueFd store_fd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!store_fd) return Status::Io("cannot open " + dir_.string() + ": " + errno_text());
  std::vector<AdoptedObject> out(files.size());
  TempFiles tmps(files.size() + 1);  // set for new content; removed unless renamed into place
  // The trial's pages are still dirty: a thread of its own starts writing them out, file by
  // file, so the disk works while the CPU hashes and the syncs below find most of it done.
  // Not on the hashing threads: sync_file_range(WRITE) blocks while the device's queue is
  // full, i.e. for most of the write, and hashing would wait behind it. Advisory only: the
  // fsyncs below are what make the bytes durable and report write errors.
  WriteBack write_back(files);
  // 1. Hash each file and link it to a temporary name in the store (a hard link, not a
  // move: the file stays where the trial wrote it until its checkpoint is registered, so a
  // coordinator killed mid-ingestion leaves the trial a complete directory to keep as an
  // orphan checkpoint).
  Status st = for_each_in_parallel(files.size(), [&](size_t i) -> Status {
    const fs::path& file = files[i];
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return Status::Io("cannot open " + file.string() + ": " + errno_text());
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    struct stat st {};
    if (verified && ::fstat(fd.get(), &st) != 0)
      return Status::Io("cannot stat " + file.string() + ": " + errno_text());
    out[i].size = verified ? static_cast<uint64_t>(st.st_size) : 0;
    auto hash = verified ? Result<std::string>((*verified)[i])
                         : sha256_fd(fd.get(), file.string(), &out[i].size);
    if (!hash.ok()) return hash.status();
    out[i].hash = *hash;
    const fs::path dest = path_of(*hash);
    if (fs::exists(dest, ec)) {
      // A collector spares objects changed recently (store/garbage_collector.h): this one
      // is about to be named by a checkpoint whose record is not committed yet.
      ::utimensat(AT_FDCWD, dest.c_str(), nullptr, 0);
      return Status::Ok();
    }
    const fs::path tmp = temp_name(*hash);
    fs::remove(tmp, ec);
    if (::link(file.c_str(), tmp.c_str()) != 0) {
      // Another file system: copy instead (made durable with the others below).
      if (::lseek(fd.get(), 0, SEEK_SET) != 0)
        return Status::Io("cannot read " + file.string() + ": " + errno_text());
      tmps[i] = tmp;  // removed on failure
      UniqueFd copy(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (!copy) return Status::Io("cannot create " + tmp.string() + ": " + errno_text());
      auto copied = copy_hashing(fd.get(), file, copy.get(), tmp);
      if (!copied.ok()) return copied.status();
      if (*copied != *hash)
        return Status::Failed(file.string() + " changed while it was being stored");
    }
    tmps[i] = tmp;
    ::chmod(tmp.c_str(), 0444);
    out[i].added = true;
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (trailer) {  // written beside the others, made durable and named with them
    const std::string bytes = trailer(out);
    AdoptedObject t{sha256_hex(bytes), bytes.size(), false};
    if (trailer_hash) *trailer_hash = t.hash;
    const fs::path dest = path_of(t.hash);
    if (fs::exists(dest, ec)) {
      ::utimensat(AT_FDCWD, dest.c_str(), nullptr, 0);
    } else {
      const fs::path tmp = temp_name(t.hash);
      tmps[files.size()] = tmp;
      UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444));
      if (!fd) return Status::Io("cannot create " + tmp.string() + ": " + errno_text());
      if (Status w = write_all(fd.get(), bytes); !w.ok())
        return Status::Io("cannot write " + tmp.string() + ": " + w.message());
      t.added = true;
    }
    out.push_back(std::move(t));
  }
  // The same content twice in one batch is stored once.
  std::vector<size_t> fresh;
  {
    std::vector<std::pair<std::string, size_t>> by_hash;
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].added) by_hash.emplace_back(out[i].hash, i);
    std::sort(by_hash.begin(), by_hash.end());
    for (size_t k = 0; k < by_hash.size(); ++k) {
      const size_t i = by_hash[k].second;
      if (k > 0 && by_hash[k - 1].first == by_hash[k].first) {
        out[i].added = false;
        fs::remove(tmps[i], ec);
        tmps[i].clear();
      } else {
        fresh.push_back(i);
      }
    }
  }
  auto files_only = [&] {
    out.resize(files.size());
    return out;
  };
  if (fresh.empty()) return files_only();
  write_back.stop();  // the syncs below write what it has not reached
  // 2. The content of every new object reaches the disk before any of them is named.
  if (fresh.size() >= kSyncfsFrom) {
    if (::syncfs(store_fd.get()) != 0)
      return Status::Io("syncfs " + dir_.string() + ": " + errno_text());
  } else {
    st = for_each_in_parallel(fresh.size(), [&](size_t k) -> Status {
      const fs::path& tmp = tmps[fresh[k]];
      UniqueFd fd(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd || ::fsync(fd.get()) != 0)
        return Status::Io("fsync " + tmp.string() + ": " + errno_text());
      return Status::Ok();
    });
    if (!st.ok()) return st;
  }
  // 3. Named under their hashes; then each directory that changed is fsynced once.
  std::vector<fs::path> dirs;
  bool new_dir = false;
  for (size_t i : fresh) {
    const fs::path dest = path_of(out[i].hash);
    if (dirs.empty() || dirs.back() != dest.parent_path()) dirs.push_back(dest.parent_path());
    new_dir |= fs::create_directories(dest.parent_path(), ec);
    if (ec) return Status::Io("cannot create " + dest.parent_path().string() + ": " + ec.message());
    if (::rename(tmps[i].c_str(), dest.c_str()) != 0)
      return Status::Io("cannot move " + tmps[i].string() +
                        " into the object store: " + errno_text());
    tmps[i].clear();
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  if (new_dir) dirs.push_back(dir_);
  st = for_each_in_parallel(dirs.size(), [&](size_t k) { return fsync_dir(dirs[k]); });
  if (!st.ok()) return st;
  return files_only();
}

Result<std::string> ObjectStore::copy_in(const fs::path& file, uint64_t* size, bool* added) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  static std::atomic<uint64_t> counter{0};
  const fs::path tmp =
      dir_ / ("tmp-copy-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  UniqueFd in(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return Status::Io("cannot read " + file.string() + ": " + errno_text());
  UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return Status::Io("cannot create " + tmp.string() + ": " + errno_text());
  ScopedDirRemover cleanup(tmp);  // removes the temporary file on every failure path
  uint64_t total = 0;
  auto copied = copy_hashing(in.get(), file, out.get(), tmp, &total);
  if (!copied.ok()) return copied.status();
  out.reset();
  const std::string hash = *copied;
  Status st = install(tmp, hash, added);
  if (!st.ok()) return st;
  cleanup.release();
  if (size) *size = total;
  return hash;
}

Result<std::string> ObjectStore::put_bytes(std::string_view bytes) {
  std::string hash = sha256_hex(bytes);
  if (contains(hash)) return hash;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  fs::path tmp = dir_ / ("tmp-" + hash + "-" + std::to_string(::getpid()));
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) return Status::Io("cannot create " + tmp.string() + ": " + errno_text());
    Status st = write_all(fd.get(), bytes);
    if (!st.ok()) {
      fs::remove(tmp, ec);
      return Status::Io("cannot write " + tmp.string() + ": " + st.message());
    }
  }
  Status st = install(tmp, hash, nullptr);
  if (!st.ok()) return st;
  return hash;
}

Result<std::string> ObjectStore::read(const std::string& hash) const {
  auto bytes = read_file(path_of(hash));
  if (!bytes.ok()) return bytes.status();
  if (sha256_hex(*bytes) != hash)
    return Status::Corrupt("object " + hash.substr(0, 12) + " is corrupt (hash mismatch)");
  return bytes;
}

namespace {

Status open_object(const fs::path& src, const std::string& hash, UniqueFd* fd) {
  fd->reset(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  if (*fd) return Status::Ok();
  if (errno == ENOENT) return Status::Corrupt("object " + hash.substr(0, 12) + " is missing");
  return Status::Io("cannot open " + src.string() + ": " + errno_text());
}

Status hash_mismatch(const std::string& hash) {
  return Status::Corrupt("object " + hash.substr(0, 12) + " is corrupt (hash mismatch)");
}

// Copies [offset, offset + length) of `in` to the same place in `out`: in the kernel where
// it can (no trip through user space; a reflink on file systems that have them).
Status copy_range(int in, int out, uint64_t offset, uint64_t length, const std::string& hash,
                  const fs::path& dest) {
  loff_t in_off = static_cast<loff_t>(offset), out_off = in_off;
  bool kernel = true;
  while (length > 0) {
    ssize_t n;
    if (kernel) {
      n = ::copy_file_range(in, &in_off, out, &out_off, length, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
        kernel = false;
        continue;
      }
    } else {
      char* buf = thread_io_buffer();
      n = ::pread(in, buf, std::min<uint64_t>(length, kIoBufferSize), in_off);
      if (n > 0) {
        for (ssize_t done = 0; done < n;) {
          ssize_t w = ::pwrite(out, buf + done, static_cast<size_t>(n - done), out_off + done);
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) return Status::Io("cannot write " + dest.string() + ": " + errno_text());
          done += w;
        }
        in_off += n;
        out_off += n;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io("cannot copy to " + dest.string() + ": " + errno_text());
    if (n == 0)
      return Status::Corrupt("object " + hash.substr(0, 12) + " is shorter than recorded");
    length -= static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status ObjectStore::copy_out(const std::string& hash, const fs::path& dest) const {
  const fs::path src = path_of(hash);
  UniqueFd in;
  Status opened = open_object(src, hash, &in);
  if (!opened.ok()) return opened;
  ::posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  UniqueFd out(::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return Status::Io("cannot create " + dest.string() + ": " + errno_text());
  auto copied = copy_hashing(in.get(), src, out.get(), dest);
  if (!copied.ok()) return copied.status();
  if (*copied != hash) return hash_mismatch(hash);
  return Status::Ok();
}

std::vector<Status> ObjectStore::copy_out_all(const std::vector<ObjectCopy>& copies) const {
  // From this size an object's hash (sequential, the slowest part) runs on one thread while
  // others copy its bytes in ranges of kRange; below it one task reads, hashes and writes.
  constexpr uint64_t kSplitFrom = 8 << 20;
  constexpr uint64_t kRange = 32 << 20;
  enum class Kind { kWhole, kHash, kRange };
  struct Task {
    size_t copy;
    Kind kind;
    uint64_t offset = 0, length = 0;
  };
  std::vector<Status> results(copies.size());
  std::vector<Task> tasks;  // longest first: a pool takes them in order
  for (size_t i = 0; i < copies.size(); ++i)
    if (copies[i].size >= kSplitFrom) tasks.push_back({i, Kind::kHash});
  for (size_t i = 0; i < copies.size(); ++i) {
    const ObjectCopy& c = copies[i];
    if (c.size < kSplitFrom) continue;
    UniqueFd out(::open(c.dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!out) {
      results[i] = Status::Io("cannot create " + c.dest.string() + ": " + errno_text());
      continue;
    }
    for (uint64_t off = 0; off < c.size; off += kRange)
      tasks.push_back({i, Kind::kRange, off, std::min(kRange, c.size - off)});
  }
  for (size_t i = 0; i < copies.size(); ++i)
    if (copies[i].size < kSplitFrom) tasks.push_back({i, Kind::kWhole});

  std::vector<Status> task_results(tasks.size());
  for_each_in_parallel(tasks.size(), [&](size_t t) {
    const Task& task = tasks[t];
    const ObjectCopy& c = copies[task.copy];
    if (!results[task.copy].ok()) return Status::Ok();  // its destination failed already
    Status& st = task_results[t];
    if (task.kind == Kind::kWhole) {
      st = copy_out(c.hash, c.dest);
      return Status::Ok();
    }
    UniqueFd in;
    st = open_object(path_of(c.hash), c.hash, &in);
    if (!st.ok()) return Status::Ok();
    if (task.kind == Kind::kHash) {
      struct stat info;
      if (::fstat(in.get(), &info) != 0) {
        st = Status::Io("cannot stat object " + c.hash.substr(0, 12) + ": " + errno_text());
      } else if (static_cast<uint64_t>(info.st_size) != c.size) {
        st = Status::Corrupt("object " + c.hash.substr(0, 12) + " has the wrong size");
      } else {
        ::posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
        auto actual = sha256_fd(in.get(), path_of(c.hash).string());
        if (!actual.ok())
          st = actual.status();
        else if (*actual != c.hash)
          st = hash_mismatch(c.hash);
      }
      return Status::Ok();
    }
    UniqueFd out(::open(c.dest.c_str(), O_WRONLY | O_CLOEXEC));
    if (!out) {
      st = Status::Io("cannot write " + c.dest.string() + ": " + errno_text());
      return Status::Ok();
    }
    st = copy_range(in.get(), out.get(), task.offset, task.length, c.hash, c.dest);
    return Status::Ok();
  });
  // A file's result: its first failure, a corrupt object before an I/O error.
  for (size_t t = 0; t < tasks.size(); ++t) {
    Status& r = results[tasks[t].copy];
    const Status& st = task_results[t];
    if (!st.ok() &&
        (r.ok() || (st.kind() == ErrorKind::kCorrupt && r.kind() != ErrorKind::kCorrupt)))
      r = st;
  }
  return results;
}

Status ObjectStore::verify(const std::string& hash) const {
  auto actual = sha256_file(path_of(hash));
  if (!actual.ok()) return Status::Corrupt("object " + hash.substr(0, 12) + " is unreadable");
  if (*actual != hash)
    return Status::Corrupt("object " + hash.substr(0, 12) + " is corrupt (hash mismatch)");
  return Status::Ok();
}

Status ObjectStore::remove(const std::string& hash) {
  std::error_code ec;
  fs::remove(path_of(hash), ec);
  if (ec) return Status::Io("cannot remove object " + hash.substr(0, 12) + ": " + ec.message());
  return Status::Ok();
}

}  // namespace cairn
