// Code snapshots (SPEC §5): the workdir's versionable files become a commit in the store's
// own bare git repository, `.cairn/code.git`, written with libgit2. "Versionable" is what
// git would keep: tracked files, and untracked files no .gitignore (nor the workdir's
// .cairnignore) excludes. The user's repository is only ever read: its index, refs, config
// and working tree are never written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

struct git_repository;

namespace cairn {

struct SnapshotOptions {
  uint64_t size_limit = 100ull << 20;          // total bytes; over it the snapshot is refused
  std::vector<std::filesystem::path> exclude;  // absolute paths left out entirely
};

// When the workdir is inside a git checkout.
struct UserGitState {
  std::string head;       // commit hex, "" when the branch has no commit yet
  std::string branch;     // short name, "" when HEAD is detached
  bool dirty = false;     // anything staged, modified or untracked (and not ignored)
  std::string repo_root;  // the checkout's top directory
};

struct CodeSnapshot {
  std::string commit;  // hex oid of the snapshot commit in code.git
  std::string tree;    // hex oid of its tree: identical content gives the identical tree
  uint64_t files = 0, bytes = 0;
  std::optional<UserGitState> git;
  // Each listing of one of code.git's objects/xx directories, as "xx", in order: the
  // directories the last snapshot's record vouched for are not here. For tests.
  std::vector<std::string> listed_object_dirs;
};

struct FileChange {
  std::string path;
  char kind = 'M';  // 'A' added, 'D' removed, 'M' modified (content, mode or type)
};

class CodeRepository {
 public:
  // `store_root` is the `.cairn` directory; code.git is created there when missing.
  static Result<CodeRepository> open(const std::filesystem::path& store_root);
  CodeRepository(CodeRepository&&) noexcept;
  CodeRepository& operator=(CodeRepository&&) noexcept;
  ~CodeRepository();

  // BadInput (naming the largest files) when the workdir is over the size limit.
  Result<CodeSnapshot> snapshot(const std::filesystem::path& workdir, const SnapshotOptions& opts,
                                const std::string& message);
  // Writes the commit's files (modes, symlinks) into `dest`, which must be absent or empty.
  Status checkout(const std::string& commit, const std::filesystem::path& dest);
  // Files that differ between two snapshot commits, sorted by path.
  Result<std::vector<FileChange>> diff(const std::string& commit_a, const std::string& commit_b);
  // The same as a unified diff, like `git diff A B`.
  Result<std::string> patch(const std::string& commit_a, const std::string& commit_b);

 private:
  CodeRepository() = default;
  std::filesystem::path dir_;
  git_repository* repo_ = nullptr;
};

}  // namespace cairn
