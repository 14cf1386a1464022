// Writing a snapshot's git objects directly, without libgit2's index or tree builder: trees
// serialized in git's format and hashed here, blobs hashed and compressed from several
// threads, and a cheap answer to "is this object stored already". Internal to store/.
#pragma once

#include <git2.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace cairn::git {

struct TreeEntry {
  std::string name;
  git_filemode_t mode = GIT_FILEMODE_BLOB;
  git_oid oid{};
};

// The content of a tree object holding `entries` (sorted here into git's order, where a
// subtree sorts as if its name ended in '/'), as `git mktree` would write it.
std::string serialize_tree(std::vector<TreeEntry>& entries);

// Which objects the repository has. Loose objects are found by listing their fan-out
// directory (objects/xx) once, on the first question about it: a readdir per 256
// directories instead of an access() per object. Anything not found loose (packed, or
// borrowed from an alternate) is asked of the odb.
class StoredObjects {
 public:
  StoredObjects(git_odb* odb, std::filesystem::path objects_dir)
      : odb_(odb), dir_(std::move(objects_dir)) {}
  bool contains(const git_oid& oid);
  void add(const git_oid& oid);

 private:
  std::vector<git_oid>& fanout(const git_oid& oid);  // listed on first use, sorted
  git_odb* odb_;
  std::filesystem::path dir_;
  bool listed_[256] = {};
  std::vector<git_oid> loose_[256];
};

// A file to store as a blob: its content, or for a symbolic link its target.
struct BlobSource {
  std::string path;  // absolute
  bool symlink = false;
  git_oid* out = nullptr;
};

// Stores every source as a loose blob (one already stored is left as it is), from up to
// `max_threads` threads, each with its own odb handle on `objects_dir`: hashing and zlib
// are the cost of a first snapshot, and each file is independent. Content is stored as
// read, with no filter (a snapshot restores bytes exactly).
Status write_blobs(git_odb* odb, const std::filesystem::path& objects_dir,
                   const std::vector<BlobSource>& sources, unsigned max_threads);

}  // namespace cairn::git
