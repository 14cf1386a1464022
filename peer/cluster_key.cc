#include "peer/cluster_key.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "common/file_util.h"
#include "common/sha256.h"

namespace cairn {

namespace {

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace

std::string cluster_key_id(const std::string& bytes) {
  return sha256_hex(bytes).substr(0, 16);
}

ClusterKey no_cluster_key() {
  // Any fixed bytes will do: they are public by definition.
  return ClusterKey{"cairn: no cluster key (loopback only)", "none"};
}

Result<ClusterKey> load_cluster_key(const std::filesystem::path& file) {
  const std::string name = file.string();
  UniqueFd fd(::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    if (errno == ENOENT) return Status::NotFound("key file " + name + " does not exist");
    return Status::BadInput("cannot read key file " + name + ": " + errno_text());
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Status::BadInput("cannot read key file " + name + ": " + errno_text());
  if (!S_ISREG(st.st_mode)) return Status::BadInput("key file " + name + " is not a regular file");
  // Checked on the opened file, so a file swapped after the check cannot slip through.
  if ((st.st_mode & 077) != 0)
    return Status::BadInput("key file " + name + " has mode " + octal_mode(st.st_mode) +
                            ": group and others must have no access (chmod 600 " + name + ")");
  if (st.st_size < static_cast<off_t>(kMinClusterKeyBytes) ||
      st.st_size > static_cast<off_t>(kMaxClusterKeyBytes))
    return Status::BadInput("key file " + name + " has " + std::to_string(st.st_size) +
                            " bytes; a cluster key has " + std::to_string(kMinClusterKeyBytes) +
                            " to " + std::to_string(kMaxClusterKeyBytes) +
                            " (cairn agent --new-key FILE writes one)");
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::BadInput("cannot read key file " + name + ": " + errno_text());
    got += static_cast<size_t>(n);
  }
  return ClusterKey{bytes, cluster_key_id(bytes)};
}

Result<ClusterKey> write_new_cluster_key(const std::filesystem::path& file) {
  const std::string name = file.string();
  std::error_code ec;
  const auto dir = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::Io("cannot create " + dir.string() + ": " + ec.message());
    ::chmod(dir.c_str(), 0700);
  }
  std::string bytes(kNewClusterKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(bytes.size())) !=
      1)
    return Status::Failed("cannot draw random bytes for a key (OpenSSL RAND_bytes failed)");
  UniqueFd fd(::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0600));
  if (!fd) {
    if (errno == EEXIST)
      return Status::BadInput("key file " + name +
                              " already exists: it is never overwritten (remove it first to "
                              "replace the team's key)");
    return Status::Io("cannot create key file " + name + ": " + errno_text());
  }
  // The umask may only have narrowed 0600; make it exactly that.
  ::fchmod(fd.get(), 0600);
  Status written = write_all(fd.get(), bytes);
  if (written.ok() && ::fsync(fd.get()) != 0)
    written = Status::Io("cannot write key file " + name + ": " + errno_text());
  if (!written.ok()) {
    ::unlink(name.c_str());
    return written;
  }
  fsync_dir(dir);
  return ClusterKey{bytes, cluster_key_id(bytes)};
}

}  // namespace cairn
