// RAII for libgit2 handles, and libgit2 errors as Status. Internal to store/.
#pragma once

#include <git2.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cairn::git {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const {
    if (p) Free(p);
  }
};

using Repository = std::unique_ptr<git_repository, Deleter<git_repository, git_repository_free>>;
using Tree = std::unique_ptr<git_tree, Deleter<git_tree, git_tree_free>>;
using TreeBuilder =
    std::unique_ptr<git_treebuilder, Deleter<git_treebuilder, git_treebuilder_free>>;
using Commit = std::unique_ptr<git_commit, Deleter<git_commit, git_commit_free>>;
using Blob = std::unique_ptr<git_blob, Deleter<git_blob, git_blob_free>>;
using Index = std::unique_ptr<git_index, Deleter<git_index, git_index_free>>;
using Reference = std::unique_ptr<git_reference, Deleter<git_reference, git_reference_free>>;
using Signature = std::unique_ptr<git_signature, Deleter<git_signature, git_signature_free>>;
using Diff = std::unique_ptr<git_diff, Deleter<git_diff, git_diff_free>>;
using StatusList = std::unique_ptr<git_status_list, Deleter<git_status_list, git_status_list_free>>;
using Odb = std::unique_ptr<git_odb, Deleter<git_odb, git_odb_free>>;

// libgit2 is initialised once per process, on first use.
void ensure_initialized();

// "WHAT: libgit2's last error message", as a Status of `kind`.
Status error(const std::string& what, ErrorKind kind = ErrorKind::kIo);

std::string hex(const git_oid& oid);
bool parse_oid(std::string_view hex, git_oid* out);

}  // namespace cairn::git
