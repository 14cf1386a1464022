// Reading snapshots back: checking one out into a directory, and comparing two.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/file_util.h"
#include "store/code_snapshot.h"
#include "store/git_handles.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

Result<git::Tree> tree_of(git_repository* repo, const std::string& commit_hex) {
  git_oid oid;
  if (!git::parse_oid(commit_hex, &oid))
    return Status::BadInput("'" + commit_hex + "' is not a snapshot commit id");
  git_commit* commit = nullptr;
  if (git_commit_lookup(&commit, repo, &oid) != 0)
    return git::error("snapshot " + commit_hex.substr(0, 12) + " is not in the store",
                      ErrorKind::kCorrupt);
  git::Commit owned(commit);
  git_tree* tree = nullptr;
  if (git_commit_tree(&tree, commit) != 0)
    return git::error("cannot read snapshot " + commit_hex.substr(0, 12), ErrorKind::kCorrupt);
  return git::Tree(tree);
}

struct CheckoutState {
  git_repository* repo;
  fs::path dest;
  Status status;
};

int write_entry(const char* root, const git_tree_entry* entry, void* payload) {
  auto* state = static_cast<CheckoutState*>(payload);
  const fs::path path = state->dest / root / git_tree_entry_name(entry);
  const git_filemode_t mode = git_tree_entry_filemode(entry);
  if (mode == GIT_FILEMODE_TREE) {
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      state->status = Status::Io("cannot create " + path.string() + ": " + errno_text());
      return -1;
    }
    return 0;
  }
  if (mode == GIT_FILEMODE_COMMIT) return 0;  // a submodule: not part of a snapshot
  git_blob* blob = nullptr;
  if (git_blob_lookup(&blob, state->repo, git_tree_entry_id(entry)) != 0) {
    state->status = git::error("cannot read " + path.string(), ErrorKind::kCorrupt);
    return -1;
  }
  git::Blob owned(blob);
  const std::string_view content(static_cast<const char*>(git_blob_rawcontent(blob)),
                                 static_cast<size_t>(git_blob_rawsize(blob)));
  if (mode == GIT_FILEMODE_LINK) {
    if (::symlink(std::string(content).c_str(), path.c_str()) != 0) {
      state->status = Status::Io("cannot create the link " + path.string() + ": " + errno_text());
      return -1;
    }
    return 0;
  }
  const mode_t perms = mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0755 : 0644;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, perms));
  Status st = fd ? write_all(fd.get(), content)
                 : Status::Io("cannot create " + path.string() + ": " + errno_text());
  if (!st.ok()) {
    state->status = st;
    return -1;
  }
  return 0;
}

Result<git::Diff> diff_commits(git_repository* repo, const std::string& a, const std::string& b) {
  auto ta = tree_of(repo, a);
  if (!ta.ok()) return ta.status();
  auto tb = tree_of(repo, b);
  if (!tb.ok()) return tb.status();
  git_diff* diff = nullptr;
  git_diff_options opts = GIT_DIFF_OPTIONS_INIT;
  // A file that became a link (or back) is one change of that path, not a removal and an
  // addition.
  opts.flags |= GIT_DIFF_INCLUDE_TYPECHANGE;
  if (git_diff_tree_to_tree(&diff, repo, ta->get(), tb->get(), &opts) != 0)
    return git::error("cannot compare snapshots");
  return git::Diff(diff);
}

}  // namespace

Status CodeRepository::checkout(const std::string& commit, const fs::path& dest) {
  auto tree = tree_of(repo_, commit);
  if (!tree.ok()) return tree.status();
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) return Status::Io("cannot create " + dest.string() + ": " + ec.message());
  if (!fs::is_empty(dest, ec)) return Status::Failed(dest.string() + " is not empty");
  CheckoutState state{repo_, dest, Status::Ok()};
  // Pre-order: a directory is created before the entries under it.
  if (git_tree_walk(tree->get(), GIT_TREEWALK_PRE, write_entry, &state) != 0 && state.status.ok())
    return git::error("cannot check out snapshot " + commit.substr(0, 12));
  return state.status;
}

Result<std::vector<FileChange>> CodeRepository::diff(const std::string& a, const std::string& b) {
  auto diff = diff_commits(repo_, a, b);
  if (!diff.ok()) return diff.status();
  std::vector<FileChange> changes;
  const size_t n = git_diff_num_deltas(diff->get());
  for (size_t i = 0; i < n; ++i) {
    const git_diff_delta* d = git_diff_get_delta(diff->get(), i);
    FileChange c;
    c.kind = d->status == GIT_DELTA_ADDED ? 'A' : d->status == GIT_DELTA_DELETED ? 'D' : 'M';
    c.path = c.kind == 'D' ? d->old_file.path : d->new_file.path;
    changes.push_back(std::move(c));
  }
  std::sort(changes.begin(), changes.end(),
            [](const FileChange& x, const FileChange& y) { return x.path < y.path; });
  return changes;
}

Result<std::string> CodeRepository::patch(const std::string& a, const std::string& b) {
  auto diff = diff_commits(repo_, a, b);
  if (!diff.ok()) return diff.status();
  git_buf buf = GIT_BUF_INIT;
  if (git_diff_to_buf(&buf, diff->get(), GIT_DIFF_FORMAT_PATCH) != 0)
    return git::error("cannot format the code changes");
  std::string text(buf.ptr ? buf.ptr : "", buf.size);
  git_buf_dispose(&buf);
  return text;
}

}  // namespace cairn
