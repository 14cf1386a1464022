// Helpers for tests of code snapshots and fingerprints: writing trees of files, ageing their
// timestamps past the stat cache's racy window (instead of sleeping), running git, and
// counting the bytes this process has read.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace cairn::testing {

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline timespec seconds_ago(int s) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  now.tv_sec -= s;
  return now;
}

// Sets the mtime (and atime) of `p`, not following a symbolic link.
inline void set_mtime(const std::filesystem::path& p, const timespec& t) {
  const timespec times[2] = {t, t};
  ::utimensat(AT_FDCWD, p.c_str(), times, AT_SYMLINK_NOFOLLOW);
}

inline timespec mtime_of(const std::filesystem::path& p) {
  struct stat st;
  ::lstat(p.c_str(), &st);
  return st.st_mtim;
}

// Moves every file's mtime an hour back, so caches written now trust their entries: the
// racy window is about modifications close to when a cache is written, not about ctime.
inline void age_tree(const std::filesystem::path& root) {
  const timespec t = seconds_ago(3600);
  for (auto it = std::filesystem::recursive_directory_iterator(root);
       it != std::filesystem::recursive_directory_iterator(); ++it)
    if (!it->is_directory()) set_mtime(it->path(), t);
}

// Runs a shell command; returns its exit status.
inline int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

inline std::string sh_out(const std::string& cmd) {
  std::string out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    ::pclose(f);
  }
  return out;
}

// `git` in `dir`, with an identity and no user or system configuration.
inline std::string git_cmd(const std::filesystem::path& dir, const std::string& args) {
  return "GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -C '" + dir.string() +
         "' -c user.name=t -c user.email=t@example.com " + args;
}

// Bytes this process has passed to read()/pread() so far (Linux /proc/self/io `rchar`):
// how a test sees whether a cache spared reading files, without timing anything.
inline uint64_t bytes_read() {
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value)
    if (key == "rchar:") return value;
  return 0;
}

// Every file under `root` (recursively, '/'-separated relative paths) with its content,
// its mode bits and mtime: to check that something was left byte for byte as it was.
struct FileState {
  std::string content;  // a symbolic link's target
  uint32_t mode = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileState&) const = default;
};

inline std::map<std::string, FileState> tree_state(const std::filesystem::path& root) {
  std::map<std::string, FileState> out;
  for (auto it = std::filesystem::recursive_directory_iterator(root);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    FileState s;
    s.mode = st.st_mode;
    s.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    if (S_ISREG(st.st_mode))
      s.content = read_bytes(it->path());
    else if (S_ISLNK(st.st_mode))
      s.content = std::filesystem::read_symlink(it->path()).string();
    out[it->path().lexically_relative(root).generic_string()] = s;
  }
  return out;
}

}  // namespace cairn::testing
