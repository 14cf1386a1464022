#include "store/object_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <atomic>
#include <cerrno>
#include <vector>

#include "common/file_util.h"
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

Result<std::string> ObjectStore::adopt(const fs::path& file, uint64_t* size, bool* added) {
  auto hash = sha256_file(file, size);
  if (!hash.ok()) return hash.status();
  // A hard link, not a move: the file stays where the trial wrote it until its checkpoint
  // is registered, so a coordinator killed mid-ingestion leaves the trial a complete
  // directory to keep as an orphan checkpoint.
  std::error_code ec;
  fs::create_directories(dir_, ec);
  // Unique per call: two threads may adopt files with the same content at once.
  static std::atomic<uint64_t> counter{0};
  const fs::path tmp =
      dir_ / ("tmp-" + *hash + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove(tmp, ec);
  if (::link(file.c_str(), tmp.c_str()) != 0) {
    Status copied = copy_file_durable(file, tmp);  // another file system: copy instead
    if (!copied.ok()) return copied;
  }
  Status st = install(tmp, *hash, added);
  if (!st.ok()) return st;
  return *hash;
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
  Sha256 h;
  uint64_t total = 0;
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io("cannot read " + file.string() + ": " + errno_text());
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
    Status st = write_all(out.get(), std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!st.ok()) return Status::Io("cannot write " + tmp.string() + ": " + st.message());
  }
  out.reset();
  const std::string hash = h.hex_digest();
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

Status ObjectStore::copy_out(const std::string& hash, const fs::path& dest) const {
  const fs::path src = path_of(hash);
  UniqueFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) {
    if (errno == ENOENT) return Status::Corrupt("object " + hash.substr(0, 12) + " is missing");
    return Status::Io("cannot open " + src.string() + ": " + errno_text());
  }
  UniqueFd out(::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return Status::Io("cannot create " + dest.string() + ": " + errno_text());
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io("cannot read " + src.string() + ": " + errno_text());
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
    Status st = write_all(out.get(), std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!st.ok()) return Status::Io("cannot write " + dest.string() + ": " + st.message());
  }
  if (h.hex_digest() != hash)
    return Status::Corrupt("object " + hash.substr(0, 12) + " is corrupt (hash mismatch)");
  return Status::Ok();
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
