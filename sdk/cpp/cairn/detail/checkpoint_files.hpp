// File-system steps of a checkpoint that the SDK does itself: durable writes, the
// files the SDK adds to a checkpoint, and orphan checkpoints (docs/protocol.md).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

namespace cairn::sdk_detail {

namespace fs = std::filesystem;

inline void fsync_path(const fs::path& path, bool directory) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Every file under `root`, then the directories, reach the disk.
inline void fsync_tree(const fs::path& root) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    fsync_path(it->path(), it->is_directory(ec));
  }
  fsync_path(root, true);
}

inline bool write_file(const fs::path& path, std::string_view data, std::string* error) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) *error = "cannot write " + path.string() + ": " + std::strerror(errno);
  return static_cast<bool>(out);
}

// Readers see the old file or the whole new one, even after a power cut.
inline bool write_file_atomically(const fs::path& path, std::string_view data, std::string* error) {
  fs::path temporary = path;
  temporary += ".tmp";
  if (!write_file(temporary, data, error)) return false;
  fsync_path(temporary, false);
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) {
    *error = "cannot rename " + temporary.string() + ": " + ec.message();
    return false;
  }
  fsync_path(path.parent_path(), true);
  return true;
}

inline std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::string rng_file_name(int rank) {
  return rank == 0 ? "cairn_rng_state.txt" : "cairn_rng_state.rank" + std::to_string(rank) + ".txt";
}

// In an orphan checkpoint (rank 0): the training and the validation reports cairn may
// not have stored, one {"step":S,"metrics":{…}} per line.
inline constexpr const char* kOrphanTrainingFile = "cairn_orphan_metrics.jsonl";
inline constexpr const char* kOrphanValidationFile = "cairn_orphan_validations.jsonl";

inline std::string orphan_marker_name(int rank) {
  return rank == 0 ? "cairn_orphan.json" : "cairn_orphan.rank" + std::to_string(rank) + ".json";
}

// An orphan directory is shared by the ranks of a trial; a single rank starts afresh.
inline bool prepare_orphan_dir(const fs::path& dir, int rank, int world_size, std::string* error) {
  std::error_code ec;
  if (world_size == 1) {
    fs::remove_all(dir, ec);
  } else {
    fs::remove(dir / orphan_marker_name(rank), ec);
  }
  fs::create_directories(dir, ec);
  if (ec) *error = "cannot create " + dir.string() + ": " + ec.message();
  return !ec;
}

// Moves the entries of `from` into `to`, copying where a rename cannot cross file systems.
inline bool move_contents(const fs::path& from, const fs::path& to, std::string* error) {
  std::error_code ec;
  for (fs::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    fs::path target = to / it->path().filename();
    std::error_code rename_ec;
    fs::rename(it->path(), target, rename_ec);
    if (rename_ec) fs::copy(it->path(), target, fs::copy_options::recursive, ec);
    if (ec) break;
  }
  if (ec) *error = "cannot move " + from.string() + " to " + to.string() + ": " + ec.message();
  return !ec;
}

// A fresh empty directory under the system's temporary directory.
// A new directory named `prefix` + six random characters in `parent`; empty (errno set)
// on failure.
inline fs::path make_unique_dir(const fs::path& parent, const std::string& prefix) {
  std::string pattern = (parent / (prefix + "XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) return {};
  return pattern;
}

inline fs::path make_scratch_dir(const std::string& prefix) {
  std::error_code ec;
  return make_unique_dir(fs::temp_directory_path(ec), prefix);
}

}  // namespace cairn::sdk_detail
